/* test_lab18_offload.c: lab 18 visible tests, part D: the offloaded update (offloaded_update in core/train/step.c)
 * gives the same bits as the update on the device, keeps the optimizer's state on the host only, and counts the
 * bytes it copies each way. */
#include "lab18_offload.h"

MPT_TEST(offload_is_the_device_step_bit_for_bit) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_ADAMW, 1.0, 1, NULL);
    for (int step = 0; step < 4; step++) lab18_pair_step(&p, step, 3e-3);
    lab18_pair_close(&p);
}

MPT_TEST(offload_copies_4_bytes_per_parameter_each_way) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_ADAMW, 1.0, 1, NULL);
    size_t n = model_num_params(p.offload_m);
    for (int step = 0; step < 3; step++) {
        train_step_result r = lab18_pair_step(&p, step, 3e-3);
        MPT_CHECK(r.offload.d2h_bytes == n * sizeof(float), "step %d: %zu bytes of gradients copied down, expected "
                  "4 bytes for each of the %zu parameters (one fp32 gradient each), counted once per step", step,
                  r.offload.d2h_bytes, n);
        MPT_CHECK(r.offload.h2d_bytes == n * sizeof(float), "step %d: %zu bytes of weights copied up, expected %zu",
                  step, r.offload.h2d_bytes, n * sizeof(float));
        MPT_CHECK(r.offload.copy_s >= 0 && r.offload.update_s > 0 && r.offload.copy_s + r.offload.update_s <= r.t_optimizer,
                  "step %d: copy_s %g and update_s %g should be the seconds of the copies and of optim_step (both "
                  "within the optimizer's %g s, the update's > 0)", step, r.offload.copy_s, r.offload.update_s,
                  r.t_optimizer);
    }
    lab18_pair_close(&p);
}

MPT_TEST(offload_keeps_the_optimizer_state_on_the_host) {
    size_t optim_before = mem_current(MEM_OPTIM), host_before = mem_current(MEM_HOST);
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_ADAMW, 1.0, 1, NULL);
    size_t n = model_num_params(p.offload_m);
    lab18_pair_step(&p, 0, 3e-3);
    lab18_pair_step(&p, 1, 3e-3);
    /* Only the device run's m and v are device state; the offloaded run's are on the host with its master and
     * gradient buffer: 4 + 4 + 8 bytes per parameter. */
    MPT_CHECK(mem_current(MEM_OPTIM) - optim_before == 8 * n, "MEM_OPTIM holds %zu bytes, expected only the device "
              "run's m and v (%zu)", mem_current(MEM_OPTIM) - optim_before, 8 * n);
    MPT_CHECK(mem_current(MEM_HOST) - host_before == 16 * n, "MEM_HOST holds %zu bytes, expected master + gradients "
              "+ m + v = 16 x %zu", mem_current(MEM_HOST) - host_before, n);
    float first = 0;
    for (size_t i = 0; i < n; i++)
        if (p.offload.state.v[i] != 0) { first = p.offload.state.v[i]; break; }
    MPT_CHECK(first > 0, "after two steps the host's v is still all zero: the update must step s->state on the host");
    lab18_pair_close(&p);
}
