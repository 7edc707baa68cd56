/* waits.h - where a CPU-side compute action's wait for its input ends
 * (internal to tf-import; steps.h says why). */
#ifndef TFI_WAITS_H
#define TFI_WAITS_H

#include "steps.h"

/* For every `PP:sRECV_Fm` / `PP:sRECV_Bm` span of trace t inside a step of
 * r (CPU side), the latest end of the receive events that started inside
 * it is when the data arrived: the matching compute action (sFm; sBm or
 * sIm) gets input_timed, and its compute_start moves there when that is
 * inside its span (counted in r->wait_trimmed).  A pair's halves then
 * start together, at the later of the two.  O((spans + receives) log
 * receives).  Returns 0 or TF_ENOMEM. */
int tfi_trim_waits(const tfi_trace *t, tfi_rank_run *r, tf_error *err);

#endif
