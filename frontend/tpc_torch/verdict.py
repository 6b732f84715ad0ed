"""The pass rule of `python -m tpc_torch.check` and of test/gpu/frontend_check.py (docs/frontend.md,
"The verdict"), with no import beyond the standard library so that the GPU machine's check (no
transformers there) applies the same rule.

f32 runs: tpc's largest |error| against PyTorch eager in f32 must be within the tolerance times
PyTorch's largest |value|. bf16 runs: PyTorch's own bf16 run is not the truth (in bf16 its router
logits can tie or cross and send tokens to other experts than f32 does), so both are measured
against the f32 yardstick (the same layers, weights and inputs in f32): tpc passes when its error
against f32 is within the tolerance, or within BF16_MULTIPLE times PyTorch-bf16's own error
against f32. The error against PyTorch-bf16 is printed for information."""

TOLERANCE = {"bf16": (3e-2, 5e-2), "f32": (1e-5, 1e-5)}  # (y, the other results), relative to max |reference|
BF16_MULTIPLE = 2.0


class Judged:
    """One result's comparison: |ok|; |measured| and |bound| (relative: the verdict is measured <=
    bound); |text|, the line's body after the result's name."""

    def __init__(self, ok, measured, bound, text):
        self.ok, self.measured, self.bound, self.text = ok, measured, bound, text


def judge(tol, err, scale, yard=None):
    """tpc's max |error| |err| against PyTorch in the run's dtype, whose max |value| is |scale|;
    |yard| None (an f32 run, or no yardstick) or (e32, t32, s32): tpc's and PyTorch-bf16's max
    |error| against the f32 yardstick and its max |value|."""
    rel = err / scale if scale else 0.0
    if yard is None:
        return Judged(rel <= tol, rel, tol, f"max|err| {err:.3g} = {100 * rel:.3g}% of max|ref| {scale:.4g} "
                      f"(tolerance {100 * tol:g}%)")
    e32, t32, s32 = yard
    r32, q32 = (e32 / s32, t32 / s32) if s32 else (0.0, 0.0)
    bound = max(tol, BF16_MULTIPLE * q32)
    return Judged(r32 <= bound, r32, bound,
                  f"vs f32: tpc {100 * r32:.3g}% of max|f32| {s32:.4g}, torch bf16 {100 * q32:.3g}% "
                  f"(bound {100 * bound:.3g}%: {100 * tol:g}% or {BF16_MULTIPLE:g}x torch bf16's); "
                  f"vs torch bf16 {100 * rel:.3g}%")


def summary(rows, tol):
    """The line of a step's other results (gradients, or a decoding step's k and v) after the label:
    |rows| = [(name, Judged)], |tol| their tolerance."""
    worst = max(rows, key=lambda r: r[1].measured / r[1].bound if r[1].bound else r[1].measured)
    passed = sum(j.ok for _, j in rows)
    if worst[1].text.startswith("max|err|"):
        within = f"within {100 * tol:g}% of max|ref|"
    else:
        within = f"within their bound against f32 ({100 * tol:g}% or {BF16_MULTIPLE:g}x torch bf16's)"
    return (f"{passed} of {len(rows)} {within}, worst {worst[0]} {100 * worst[1].measured:.3g}% "
            f"(bound {100 * worst[1].bound:.3g}%): {'ok' if passed == len(rows) else 'FAIL'}")
