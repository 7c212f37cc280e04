#!/usr/bin/env python3
"""Golden trajectories for tests/sampler/sampler_test.cpp (SampleAv.MatchesComfyTranscription*).

An FP64 numpy transcription of ComfyUI's sampling path for H3, written from the ComfyUI sources rather
than from src/sampler: comfy/samplers.py simple_scheduler over ModelSamplingDiscreteFlow (float32 grid),
comfy/k_diffusion/sampling.py res_multistep (eta 0) / sample_euler, comfy/ldm/minimax/model.py forward
(audio carry (sigma_a/sigma_v) and velocity conversion) and CONST.calculate_denoised. Also the reference
mode (two linspace grids, each stream its own recursion, Euler as the x0 blend). The fixed analytic
denoiser below is mirrored in the C++ test. Run: python3 tests/sampler/comfy_res_multistep_golden.py
"""
import math
import numpy as np

N = 6


def noise(n, salt):
    return np.array([math.sin(0.7 * i + salt) * 1.3 + 0.2 * math.cos(1.9 * i) for i in range(n)])


def vel_video(x, s):  # data-ward velocity the "model" predicts
    return np.tanh(x) * (1.0 + s) - 0.3 * x + 0.1


def vel_audio(x, s):
    return np.cos(x) * s - 0.5 * x


def comfy_simple(steps, shift):
    k = np.arange(1, 1001)
    t = (k.astype(np.float32) / np.float32(1000)) * np.float32(1000)
    t = (t / np.float32(1000)).astype(np.float32)
    s = np.float32(shift)
    g = (s * t / (np.float32(1) + (s - np.float32(1)) * t)).astype(np.float32)
    sig = [float(g[-(1 + int(x * 1000 / steps))]) for x in range(steps)] + [0.0]
    return np.array(sig, dtype=np.float32).astype(np.float64)


def time_shift_sigma(sigma, from_shift, to_shift):
    base = sigma / (from_shift + sigma * (1.0 - from_shift))
    return to_shift * base / (1.0 + (to_shift - 1.0) * base)


def res_loop(model, x, sigmas, use_res, euler_blend=False):
    t_fn = lambda s: -math.log(s)
    phi1 = lambda t: math.expm1(t) / t
    phi2 = lambda t: (phi1(t) - 1.0) / t
    old_d, old_sd = None, None
    for i in range(len(sigmas) - 1):
        d = model(x, sigmas[i], i)
        sd = sigmas[i + 1]
        if sd == 0 or old_d is None or not use_res:
            if euler_blend:
                r = sd / sigmas[i]
                x = r * x + (1 - r) * d
            else:
                x = x + (x - d) / sigmas[i] * (sd - sigmas[i])
        else:
            t, t_old, t_next, t_prev = t_fn(sigmas[i]), t_fn(old_sd), t_fn(sd), t_fn(sigmas[i - 1])
            h = t_next - t
            c2 = (t_prev - t_old) / h
            b1 = phi1(-h) - phi2(-h) / c2
            b2 = phi2(-h) / c2
            x = math.exp(-h) * x + h * (b1 * d + b2 * old_d)
        old_d, old_sd = d, sd
    return x


def parity(steps, sv_shift, sa_shift, use_res):
    k = sv_shift / sa_shift
    sig = comfy_simple(steps, sv_shift)
    xv, y = noise(N, 0.0), noise(N, 1.0)

    def model(x, sv, i):
        xv, y = x[:N], x[N:]
        sa = time_shift_sigma(sv, sv_shift, sa_shift)
        carry = sa / sv
        xa = y * carry
        u_v = -vel_video(xv, sv)           # ComfyUI flow output is noise-ward: u = -v
        u_a = -vel_audio(xa, sa)
        out_y = (1.0 - k) * xa + (1.0 + (k - 1.0) * sa) * u_a
        return np.concatenate([xv - sv * u_v, y - sv * out_y])  # CONST.calculate_denoised

    x = res_loop(model, np.concatenate([xv, y]), sig, use_res)
    return x[:N], x[N:] / k


def reference(steps, sv_shift, sa_shift, use_res):
    lin = np.linspace(1.0, 0.0, steps + 1)
    sv = sv_shift * lin / (1 + (sv_shift - 1) * lin)
    sa = sa_shift * lin / (1 + (sa_shift - 1) * lin)
    xv = res_loop(lambda x, s, i: x + s * vel_video(x, s), noise(N, 0.0), sv, use_res, euler_blend=True)
    xa = res_loop(lambda x, s, i: x + s * vel_audio(x, s), noise(N, 1.0), sa, use_res, euler_blend=True)
    return xv, xa


if __name__ == "__main__":
    for name, fn in (("parity", parity), ("reference", reference)):
        for use_res in (False, True):
            for steps, svs in ((12, 12.0), (4, 6.0)):
                v, a = fn(steps, svs, 3.0, use_res)
                print(name, "res" if use_res else "euler", steps, svs)
                print("  video {" + ", ".join("%.9g" % q for q in v) + "}")
                print("  audio {" + ", ".join("%.9g" % q for q in a) + "}")
