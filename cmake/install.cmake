# install.cmake - what `cmake --install` puts where (included last by the
# top level): the five programs, the libraries other programs can link, the
# public headers, and a pkg-config file per library:
#
#   timelyfreeze         tf/*.h: schedules, profiles, the DAG, the freeze LP,
#                        plans (libtfplanner)
#   timelyfreeze-render  tf/timeline.h, tf/pareto_plot.h, tf/canvas.h:
#                        timelines, traces, the trade-off chart and the
#                        canvas they are drawn on (libtfrender, Graphviz)
#   timelyfreeze-exec    tfx/*.h: the executor (libtfexec, libtfexec_cuda,
#                        libtfexec_core)
#
# Each library is installed twice: shared (libX.so.MAJOR.MINOR, its SONAME
# link and libX.so; shared_libraries.cmake) and static (libX.a).  The plain
# `pkg-config --cflags --libs timelyfreeze` links the shared one; --static
# adds what the static one itself links (lp_solve, cJSON, Graphviz, BLAS,
# CUDA) for a program that links the archive.  The programs link the static
# libraries, so they need only system libraries (and CUDA's) at run time.
include(GNUInstallDirs)

set(_tf_programs tf-plan tf-dot tf-study tf-exec tf-import)
set(_tf_libraries tfplanner tfrender tfexec tfexec_cuda tfexec_core)
foreach(_t IN LISTS _tf_programs _tf_libraries)
  if(NOT TARGET ${_t})
    message(FATAL_ERROR "install.cmake: target ${_t} is missing")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/shared_libraries.cmake)
tf_add_shared_libraries(${_tf_libraries})
list(TRANSFORM _tf_libraries APPEND _shared OUTPUT_VARIABLE _tf_shared_libraries)

# An installed tf-exec (and libtfexec_cuda.so) built with CUDA finds the
# toolkit's and NCCL's libraries where they were at link time, even outside
# ld.so's folders; system folders need no run path.
if(TF_HAVE_CUDA)
  set(_tf_cuda_rpath)
  foreach(_f IN ITEMS ${CUDA_cudart_LIBRARY} ${CUDA_cublas_LIBRARY} ${NCCL_LIBRARY})
    get_filename_component(_d "${_f}" DIRECTORY)
    if(NOT _d IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND _tf_cuda_rpath "${_d}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _tf_cuda_rpath)
  set_property(TARGET tf-exec APPEND PROPERTY INSTALL_RPATH ${_tf_cuda_rpath})
  set_property(TARGET tfexec_cuda_shared APPEND PROPERTY INSTALL_RPATH ${_tf_cuda_rpath})
endif()
install(TARGETS ${_tf_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${_tf_libraries} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ${_tf_shared_libraries} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/planner/include/tf
                  ${PROJECT_SOURCE_DIR}/executor/include/tfx
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/timelyfreeze)

# What each static library needs at link time, as pkg-config Libs.private.
string(JOIN " " TF_PC_PLANNER_PRIVATE "${LPSOLVE_LIBRARY}" "${COLAMD_LIBRARY}" "${CLP_LIBRARY}"
     "${COINUTILS_LIBRARY}" -ldl -lm)
set(TF_PC_EXEC_PRIVATE "-lpthread -lm")
set(TF_PC_EXEC_REQUIRES "")
if(OPENBLAS_FOUND)
  set(TF_PC_EXEC_REQUIRES "openblas")
else()
  string(APPEND TF_PC_EXEC_PRIVATE " ${CBLAS_LIBRARY}")
endif()
if(TF_HAVE_CUDA)
  string(APPEND TF_PC_EXEC_PRIVATE
         " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas ${NCCL_LIBRARY} -lstdc++")
endif()
# The files find the prefix from where they lie (pkg-config's ${pcfiledir}),
# so that `cmake --install build --prefix DIR` works for any DIR; their Libs
# add that DIR's library folder as the program's run path.
file(RELATIVE_PATH TF_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" TF_PC_TO_PREFIX "${TF_PC_TO_PREFIX}")
foreach(_pc timelyfreeze timelyfreeze-render timelyfreeze-exec)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in ${PROJECT_BINARY_DIR}/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${_pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
