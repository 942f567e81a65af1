// nvtx_spans.cu: the profiler's spans pushed and popped as NVTX ranges in the domain "mixpar" (nvtx_spans.h).
#include "cuda/nvtx_spans.h"

#include <nvtx3/nvToolsExt.h>

namespace {

nvtxDomainHandle_t mixpar_domain() {
    static nvtxDomainHandle_t domain = nvtxDomainCreateA("mixpar");
    return domain;
}

// ARGB colors per kind, as the Perfetto trace's categories: spans grey, kernels blue, communication orange.
uint32_t kind_color(prof_kind kind) {
    switch (kind) {
    case PROF_KIND_KERNEL: return 0xff0072b2u;
    case PROF_KIND_COMM: return 0xffd55e00u;
    default: return 0xff999999u;
    }
}

void range_begin(void *, const char *name, prof_kind kind) {
    nvtxEventAttributes_t a = {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = kind_color(kind);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(mixpar_domain(), &a);
}

void range_end(void *, const char *) { nvtxDomainRangePop(mixpar_domain()); }

}  // namespace

extern "C" void nvtx_spans_attach(prof *p) {
    prof_listener l = {range_begin, range_end, nullptr};
    prof_set_listener(p, &l);
}
