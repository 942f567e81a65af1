// convert.cu: fp16/bf16 encoders on the GPU, bit for bit like fp/half.c, and a self-test against libmixpar and CUDA's intrinsics.
//
// Built by tools/cuda_check.sh (`make cuda-check`) into build/cuda/cuda_selftest, linked with NCCL and cudart.
// Run where a GPU exists, it converts a sweep of tricky fp32 values (every fp16 and bf16 value, the midpoints
// between neighbours and one fp32 ulp either side, NaNs with payloads, fp32 subnormals, random patterns) on the
// device and compares every result with
//   1. the CPU reference in libmixpar (fp16_from_float, bf16_from_float, fp16_to_float): must match exactly;
//   2. CUDA's own __float2half_rn / __float2bfloat16_rn / __half2float: must match exactly except for NaN
//      payloads (CUDA returns a canonical NaN; ours keeps the payload bits, see fp/half.h), which are counted.
// Without a GPU it says so and exits 0, so the build check works on any machine with nvcc.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// libmixpar is C: base/rng.h has no extern "C" block of its own (fp/half.h does).
extern "C" {
#include "base/rng.h"
}
#include "fp/half.h"

// ------------------------------------------------------------------ device encoders (the algorithm of fp/half.c)

// fp32 bits -> fp16 bits, round to nearest even; subnormals; overflow to inf; NaN quiet with the top payload bits.
__device__ __forceinline__ uint16_t dev_fp16_from_bits(uint32_t bits) {
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) return sign | (uint16_t)(0x7e00u | ((abs_bits >> 13) & 0x01ffu));
    if (abs_bits >= 0x477ff000u) return sign | 0x7c00u; // >= 65520 rounds past 65504
    if (abs_bits >= 0x38800000u) {                      // normal in fp16
        uint32_t rebased = abs_bits - (112u << 23);
        uint32_t kept = rebased >> 13, dropped = rebased & 0x1fffu;
        if (dropped > 0x1000u || (dropped == 0x1000u && (kept & 1u))) kept += 1;
        return sign | (uint16_t)kept;
    }
    if (abs_bits >= 0x00800000u) { // fp16 subnormal or zero
        uint32_t significand = (abs_bits & 0x007fffffu) | 0x00800000u;
        uint32_t shift = 126u - (abs_bits >> 23);
        if (shift > 24) return sign;
        uint32_t kept = significand >> shift, dropped = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (dropped > half || (dropped == half && (kept & 1u))) kept += 1;
        return sign | (uint16_t)kept;
    }
    return sign; // fp32 zeros and subnormals
}

// fp32 bits -> bf16 bits: add just under half of the dropped range plus the kept lsb; NaN quieted first.
__device__ __forceinline__ uint16_t dev_bf16_from_bits(uint32_t bits) {
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// fp16 bits -> fp32 bits, exact; NaN payload kept and made quiet.
__device__ __forceinline__ uint32_t dev_fp16_to_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u);
    if (exponent != 0) return sign | ((exponent + 112u) << 23) | (mantissa << 13);
    if (mantissa == 0) return sign;
    uint32_t exponent32 = 113;
    while ((mantissa & 0x0400u) == 0) {
        mantissa <<= 1;
        exponent32 -= 1;
    }
    return sign | (exponent32 << 23) | ((mantissa & 0x03ffu) << 13);
}

// ------------------------------------------------------------------ kernels

// x: (n,) fp32 -> ours16, cuda16, oursbf, cudabf: (n,) 16-bit patterns. One thread per element, grid-stride.
__global__ void encode_kernel(const float *x, size_t n, uint16_t *ours16, uint16_t *cuda16, uint16_t *oursbf,
                              uint16_t *cudabf) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t bits = __float_as_uint(x[i]);
        ours16[i] = dev_fp16_from_bits(bits);
        oursbf[i] = dev_bf16_from_bits(bits);
        cuda16[i] = __half_as_ushort(__float2half_rn(x[i]));
        cudabf[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    }
}

// h: (65536,) every fp16 pattern -> ours, cuda: (65536,) fp32 bit patterns.
__global__ void decode_kernel(const uint16_t *h, size_t n, uint32_t *ours, uint32_t *cuda) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        ours[i] = dev_fp16_to_bits(h[i]);
        cuda[i] = __float_as_uint(__half2float(__ushort_as_half(h[i])));
    }
}

// ------------------------------------------------------------------ host

#define CUDA_CHECK(call)                                                                                        \
    do {                                                                                                        \
        cudaError_t err_ = (call);                                                                              \
        if (err_ != cudaSuccess) {                                                                              \
            fprintf(stderr, "cuda_selftest: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,                \
                    cudaGetErrorString(err_));                                                                  \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

static void push_neighbourhood(std::vector<float> &x, float v, float next) {
    x.push_back(v);
    x.push_back(-v);
    x.push_back(nextafterf(v, 0.0f));
    x.push_back(nextafterf(v, INFINITY));
    if (std::isfinite(v) && std::isfinite(next)) {
        float mid = (float)(((double)v + (double)next) / 2);
        x.push_back(mid);
        x.push_back(-mid);
        x.push_back(nextafterf(mid, 0.0f));
        x.push_back(nextafterf(mid, INFINITY));
    }
}

// The tricky values: every fp16 and bf16 value with its neighbourhood, NaN payloads, fp32 subnormals, random bits.
static std::vector<float> sweep(void) {
    std::vector<float> x;
    for (uint32_t h = 0; h < 0x7c00; h++) push_neighbourhood(x, fp16_to_float((uint16_t)h), h + 1 < 0x7c00 ? fp16_to_float((uint16_t)(h + 1)) : 65536.0f);
    for (uint32_t b = 0; b < 0x7f80; b++) push_neighbourhood(x, bf16_to_float((uint16_t)b), bf16_to_float((uint16_t)(b + 1)));
    static const uint32_t special[] = {0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0x7fa00000, 0x7fbfffff,
                                       0x7fc00000, 0xffc12345, 0x7f802000, 0x7fffffff, 0x00000001, 0x807fffff,
                                       0x00010000, 0x00018000, 0x00008000, 0x477ff000, 0x477fefff, 0x7f7f8000};
    for (uint32_t s : special) x.push_back(fp_float_from_bits(s));
    mp_rng rng;
    mp_rng_seed(&rng, 2024);
    for (int i = 0; i < 1000000; i++) x.push_back(fp_float_from_bits(mp_rng_u32(&rng)));
    return x;
}

static bool is_nan16(uint16_t h, uint32_t exponent_mask) { return (h & exponent_mask) == exponent_mask && (h & 0x7fffu) != exponent_mask; }

int main(void) {
    int nccl_version = 0;
    ncclResult_t nr = ncclGetVersion(&nccl_version);
    if (nr != ncclSuccess) {
        fprintf(stderr, "cuda_selftest: ncclGetVersion failed: %s\n", ncclGetErrorString(nr));
        return 1;
    }
    printf("cuda_selftest: NCCL %d.%d.%d (library), built against NCCL %d.%d.%d; CUDA runtime headers %d\n",
           nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
           CUDART_VERSION);

    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        printf("cuda_selftest: no CUDA GPU available (%s): device self-test skipped\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("cuda_selftest: GPU 0: %s (sm_%d%d), %d device(s)\n", prop.name, prop.major, prop.minor, devices);

    // encode: the sweep on the device
    std::vector<float> x = sweep();
    size_t n = x.size();
    float *dx;
    uint16_t *d_out[4];
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    for (auto &p : d_out) CUDA_CHECK(cudaMalloc(&p, n * sizeof(uint16_t)));
    CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    encode_kernel<<<1024, 256>>>(dx, n, d_out[0], d_out[1], d_out[2], d_out[3]);
    CUDA_CHECK(cudaGetLastError());
    std::vector<uint16_t> ours16(n), cuda16(n), oursbf(n), cudabf(n);
    CUDA_CHECK(cudaMemcpy(ours16.data(), d_out[0], n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(cuda16.data(), d_out[1], n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(oursbf.data(), d_out[2], n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(cudabf.data(), d_out[3], n * 2, cudaMemcpyDeviceToHost));

    size_t bad_cpu16 = 0, bad_cpubf = 0, bad_cuda16 = 0, bad_cudabf = 0, nan_payload16 = 0, nan_payloadbf = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t cpu16 = fp16_from_float(x[i]), cpubf = bf16_from_float(x[i]);
        if (ours16[i] != cpu16 && bad_cpu16++ < 5)
            printf("  fp16 device 0x%04x != CPU 0x%04x for fp32 0x%08x\n", ours16[i], cpu16, fp_float_bits(x[i]));
        if (oursbf[i] != cpubf && bad_cpubf++ < 5)
            printf("  bf16 device 0x%04x != CPU 0x%04x for fp32 0x%08x\n", oursbf[i], cpubf, fp_float_bits(x[i]));
        if (ours16[i] != cuda16[i]) {
            if (is_nan16(ours16[i], 0x7c00) && is_nan16(cuda16[i], 0x7c00))
                nan_payload16++;
            else if (bad_cuda16++ < 5)
                printf("  fp16 ours 0x%04x != __float2half_rn 0x%04x for fp32 0x%08x\n", ours16[i], cuda16[i],
                       fp_float_bits(x[i]));
        }
        if (oursbf[i] != cudabf[i]) {
            if (is_nan16(oursbf[i], 0x7f80) && is_nan16(cudabf[i], 0x7f80))
                nan_payloadbf++;
            else if (bad_cudabf++ < 5)
                printf("  bf16 ours 0x%04x != __float2bfloat16_rn 0x%04x for fp32 0x%08x\n", oursbf[i], cudabf[i],
                       fp_float_bits(x[i]));
        }
    }

    // decode: every fp16 pattern
    std::vector<uint16_t> all(65536);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    uint16_t *dh;
    uint32_t *d_ours, *d_cuda;
    CUDA_CHECK(cudaMalloc(&dh, 65536 * 2));
    CUDA_CHECK(cudaMalloc(&d_ours, 65536 * 4));
    CUDA_CHECK(cudaMalloc(&d_cuda, 65536 * 4));
    CUDA_CHECK(cudaMemcpy(dh, all.data(), 65536 * 2, cudaMemcpyHostToDevice));
    decode_kernel<<<256, 256>>>(dh, 65536, d_ours, d_cuda);
    CUDA_CHECK(cudaGetLastError());
    std::vector<uint32_t> dec_ours(65536), dec_cuda(65536);
    CUDA_CHECK(cudaMemcpy(dec_ours.data(), d_ours, 65536 * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(dec_cuda.data(), d_cuda, 65536 * 4, cudaMemcpyDeviceToHost));
    size_t bad_dec_cpu = 0, bad_dec_cuda = 0, nan_payload_dec = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t cpu = fp_float_bits(fp16_to_float((uint16_t)h));
        if (dec_ours[h] != cpu && bad_dec_cpu++ < 5)
            printf("  fp16 0x%04x: device decode 0x%08x != CPU 0x%08x\n", h, dec_ours[h], cpu);
        if (dec_ours[h] != dec_cuda[h]) {
            bool both_nan = (dec_ours[h] & 0x7fffffffu) > 0x7f800000u && (dec_cuda[h] & 0x7fffffffu) > 0x7f800000u;
            if (both_nan)
                nan_payload_dec++;
            else if (bad_dec_cuda++ < 5)
                printf("  fp16 0x%04x: ours 0x%08x != __half2float 0x%08x\n", h, dec_ours[h], dec_cuda[h]);
        }
    }

    for (auto &p : d_out) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dh));
    CUDA_CHECK(cudaFree(d_ours));
    CUDA_CHECK(cudaFree(d_cuda));

    printf("cuda_selftest: %zu fp32 values encoded, 65536 fp16 patterns decoded on the device\n", n);
    printf("  device vs CPU reference:  fp16 %zu mismatches, bf16 %zu, fp16 decode %zu\n", bad_cpu16, bad_cpubf,
           bad_dec_cpu);
    printf("  device vs CUDA intrinsics: fp16 %zu mismatches, bf16 %zu, fp16 decode %zu "
           "(NaN payload differences, allowed: %zu, %zu, %zu)\n",
           bad_cuda16, bad_cudabf, bad_dec_cuda, nan_payload16, nan_payloadbf, nan_payload_dec);
    bool ok = bad_cpu16 == 0 && bad_cpubf == 0 && bad_dec_cpu == 0 && bad_cuda16 == 0 && bad_cudabf == 0 &&
              bad_dec_cuda == 0;
    printf("cuda_selftest: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
