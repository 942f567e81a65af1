/* nvtx_spans.h: the profiler's spans as NVTX ranges (CUDA build), so Nsight Systems shows them over the GPU's work. */
#ifndef MIXPAR_CUDA_NVTX_SPANS_H
#define MIXPAR_CUDA_NVTX_SPANS_H

/* NVTX (NVIDIA Tools Extension) is a header-only API in the CUDA Toolkit (nvtx3/nvToolsExt.h): a range pushed on
 * a thread and popped later appears in Nsight Systems' timeline (nsys profile) beside the kernels the GPU ran in
 * it. The CPU profiler (prof/prof.h) already knows where every span begins and ends; nvtx_spans_attach makes it
 * push and pop a range for each, in the domain "mixpar", colored by kind (span, kernel). Without a tool attached
 * to the process each push and pop returns at once.
 *
 *     prof *p = prof_create(rank, NULL, NULL);
 *     nvtx_spans_attach(p);          // step > forward > block_fwd > matmul_fwd:qkv ... now in nsys too
 *
 * Built and compile-checked by tools/cuda_check.sh (make cuda-check); the CPU build never includes it. */

#ifdef __cplusplus
extern "C" {
#endif

#include "prof/prof.h"

/* Mirrors p's spans into NVTX ranges from now on (prof_set_listener). */
void nvtx_spans_attach(prof *p);
/* A range around a block of host code outside the profiler: NVTX_SCOPE("h2d copy"); ... the range ends with the
 * scope (C++ only). */
#ifdef __cplusplus
}
#include <nvtx3/nvToolsExt.h>
struct nvtx_scope {
    explicit nvtx_scope(const char *name) { nvtxRangePushA(name); }
    ~nvtx_scope() { nvtxRangePop(); }
    nvtx_scope(const nvtx_scope &) = delete;
    nvtx_scope &operator=(const nvtx_scope &) = delete;
};
#define NVTX_SCOPE_CAT2(a, b) a##b
#define NVTX_SCOPE_CAT(a, b) NVTX_SCOPE_CAT2(a, b)
#define NVTX_SCOPE(name) nvtx_scope NVTX_SCOPE_CAT(nvtx_scope_, __LINE__)(name)
#endif

#endif
