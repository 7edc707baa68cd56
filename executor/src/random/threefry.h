/* threefry.h - the block function under tfx/rng.h (internal to the core;
 * the tests check it against the published known answers). */
#ifndef TFX_THREEFRY_H
#define TFX_THREEFRY_H

#include <stdint.h>

/* Threefry-4x64 with 20 rounds: out = E_key(counter).  out may not alias
 * the inputs.  Matches Random123's threefry4x64 (its kat_vectors). */
void tfx_threefry4x64_20(const uint64_t key[4], const uint64_t counter[4], uint64_t out[4]);

#endif
