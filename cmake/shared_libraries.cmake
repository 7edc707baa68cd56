# shared_libraries.cmake - a shared library beside each installed static one
# (included by install.cmake).
#
# tf_add_shared_libraries(LIB...) makes LIB_shared for every LIB: the same
# object files (each source compiles once) linked as libLIB.so.MAJOR.MINOR
# with that SONAME and the libLIB.so link, beside libLIB.a.  The build's own
# programs and tests keep linking the static libraries, so they run from
# anywhere without a run path to this project's libraries; the shared ones
# are for programs built against an installed copy with pkg-config.
#
# A twin links what its static library links, with every library of the set
# replaced by its twin: libtfrender.so needs libtfplanner.so instead of
# holding a second copy of the planner.  Static archives of other projects
# linked in (lp_solve: Debian ships no shared one) keep their symbols local,
# so a program with its own lp_solve does not clash with ours.
#
# Run path: each twin finds the others beside it ($ORIGIN), so an installed
# copy needs no LD_LIBRARY_PATH (install.cmake adds CUDA's folders).

# 0.x releases may change the ABI at each minor version, so the SONAME
# carries MAJOR.MINOR until 1.0, then MAJOR alone.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(TF_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(TF_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()

# _tf_link_like_static(LIB MEMBERS...): LIB_shared links what LIB links,
# public and private as LIB declared them (its INTERFACE_LINK_LIBRARIES names
# the public ones bare), each of MEMBERS replaced by its twin.
function(_tf_link_like_static lib)
  set(members ${ARGN})
  get_target_property(deps ${lib} LINK_LIBRARIES)
  get_target_property(public ${lib} INTERFACE_LINK_LIBRARIES)
  if(NOT deps)
    set(deps "")
  endif()
  set(public_deps)
  set(private_deps)
  foreach(dep IN LISTS deps)
    set(twin_dep ${dep})
    if(dep IN_LIST members)
      set(twin_dep ${dep}_shared)
    endif()
    if(dep IN_LIST public)
      list(APPEND public_deps ${twin_dep})
    else()
      list(APPEND private_deps ${twin_dep})
    endif()
  endforeach()
  target_link_libraries(${lib}_shared PUBLIC ${public_deps} PRIVATE ${private_deps})
endfunction()

function(tf_add_shared_libraries)
  foreach(lib IN LISTS ARGN)
    set_target_properties(${lib} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    add_library(${lib}_shared SHARED $<TARGET_OBJECTS:${lib}>)
    add_dependencies(${lib}_shared ${lib})
    _tf_link_like_static(${lib} ${ARGN})
    # Public dependencies reach every library above them: each keeps only
    # those it calls.
    target_link_options(${lib}_shared PRIVATE -Wl,--as-needed -Wl,--exclude-libs,ALL)
    # A missing dependency is a link error here, not at a user's link.  The
    # sanitizer runtimes are not linked into shared libraries by clang, so
    # their builds leave the check out.
    if(NOT (TF_SANITIZE OR TF_TSAN OR TF_FUZZ))
      target_link_options(${lib}_shared PRIVATE -Wl,--no-undefined)
    endif()
    set_target_properties(${lib}_shared PROPERTIES
      OUTPUT_NAME ${lib}
      VERSION ${PROJECT_VERSION}
      SOVERSION ${TF_SOVERSION}
      LINKER_LANGUAGE C
      INSTALL_RPATH "$ORIGIN")
  endforeach()
endfunction()
