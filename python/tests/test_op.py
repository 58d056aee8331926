"""Tests of the PyTorch op (`import detmoe`). CPU-side checks (schemas, fake tensors, argument
errors, the module) run everywhere; the GPU tests skip with their reason when torch sees no
CUDA device, and run on the H200. Run: PYTHONPATH=build/python python -m unittest -v test_op
(from python/tests), or through CTest (torch_op.tests)."""
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import detmoe
import fp64_layer

HAS_GPU = torch.cuda.is_available()
NO_GPU = "no CUDA device visible to torch: the GPU tests of the op run on the GPU machine"
SOURCE = os.environ.get("DETMOE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def problem(T=300, H=256, F=128, E=16, k=4, Fs=0, routing="uniform", seed=0, device="cuda", wdtype=torch.bfloat16):
    """A problem as a torch user makes one: torch's own RNG, router and layouts."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    rnd = lambda *s, scale=1.0: torch.randn(*s, generator=g) * scale
    logits = rnd(T, E)
    if routing == "hot":  # expert 3 in most tokens' top-k
        logits[: T * 4 // 5, 3] += 10
    elif routing == "empty":  # only the first half of the experts ever picked
        logits[:, E // 2:] -= 100
    top, idx = logits.topk(k, dim=-1)
    p = {
        "x": rnd(T, H).to(torch.bfloat16),
        "topk_idx": idx,
        "topk_w": torch.softmax(top, -1),
        "w_gate_up": rnd(E, 2 * F, H, scale=H ** -0.5).to(wdtype),
        "w_down": rnd(E, H, F, scale=F ** -0.5).to(wdtype),
        "ws_gate_up": rnd(2 * Fs, H, scale=H ** -0.5).to(wdtype) if Fs else None,
        "ws_down": rnd(H, Fs, scale=Fs ** -0.5).to(wdtype) if Fs else None,
        "dout": rnd(T, H).to(torch.bfloat16),
    }
    return {n: (t.to(device) if t is not None else None) for n, t in p.items()}


PARAMS = ("x", "topk_w", "w_gate_up", "w_down", "ws_gate_up", "ws_down")


def run(p, backward=True, **kw):
    """out and, with backward, every gradient, as a dict of tensors."""
    leaves = {n: (p[n].detach().clone().requires_grad_(backward) if p[n] is not None else None) for n in PARAMS}
    ctx = torch.enable_grad() if backward else torch.no_grad()
    with ctx:
        out = detmoe.moe_stacked(leaves["x"], p["topk_idx"], leaves["topk_w"], leaves["w_gate_up"], leaves["w_down"],
                                 leaves["ws_gate_up"], leaves["ws_down"], **kw)
        res = {"out": out.detach()}
        if backward:
            out.backward(p["dout"])
            names = {"x": "d_x", "topk_w": "d_topk_w", "w_gate_up": "dw_gate_up", "w_down": "dw_down",
                     "ws_gate_up": "dws_gate_up", "ws_down": "dws_down"}
            res.update({names[n]: t.grad for n, t in leaves.items() if t is not None})
    torch.cuda.synchronize()
    return res


def bitwise_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8),
                                                                     b.contiguous().view(torch.uint8))


def digest(tensors):
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


class CpuSide(unittest.TestCase):
    """What needs no GPU: schemas, fake/meta shapes, argument errors, the module."""

    def test_schemas_are_registered(self):
        for op in ("forward", "backward", "resolve_impl", "synchronize", "release_idle_layers"):
            self.assertTrue(hasattr(torch.ops.detmoe, op), op)
        self.assertIn("Tensor? ws_gate_up", str(torch.ops.detmoe.forward.default._schema))

    def test_meta_tensors_give_the_output_shapes(self):
        for Fs, grad_fp32 in ((0, True), (64, False)):
            p = problem(Fs=Fs, device="meta")
            out, ctx = torch.ops.detmoe.forward(p["x"], p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"],
                                                p["ws_gate_up"], p["ws_down"], "auto", 0, True, grad_fp32, True)
            self.assertEqual((out.shape, out.dtype, ctx.shape, ctx.device.type),
                             (p["x"].shape, torch.bfloat16, torch.Size([1]), "cpu"))
            grads = torch.ops.detmoe.backward(torch.zeros(1, dtype=torch.long), p["dout"], p["x"], p["topk_idx"],
                                              p["topk_w"], p["w_gate_up"], p["w_down"], p["ws_gate_up"], p["ws_down"],
                                              grad_fp32)
            g = torch.float32 if grad_fp32 else torch.bfloat16
            want = [((300, 256), torch.bfloat16), ((300, 4), torch.float32), ((16, 256, 256), g), ((16, 256, 128), g),
                    ((2 * Fs, 256), g), ((256, Fs), g)]
            self.assertEqual([(tuple(t.shape), t.dtype) for t in grads], want)

    def test_fake_tensor_mode(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            p = problem(device="meta")
            out = detmoe.moe_stacked(p["x"], p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"])
            self.assertEqual(out.shape, p["x"].shape)

    def assert_raises(self, kind, fragment, fn):
        with self.assertRaises(kind) as caught:
            fn()
        self.assertIn(fragment, str(caught.exception))

    def test_bad_arguments_name_the_argument_and_value(self):
        p = problem(device="meta")
        call = lambda **over: detmoe.moe_stacked(*[over.get(n, p[n]) for n in ("x", "topk_idx", "topk_w", "w_gate_up",
                                                                               "w_down")], **over.get("kw", {}))
        self.assert_raises(TypeError, "x has dtype torch.float32", lambda: call(x=p["x"].float()))
        self.assert_raises(ValueError, "x has 3 dimensions", lambda: call(x=p["x"].view(1, 300, 256)))
        self.assert_raises(ValueError, "topk_w [300, 3] has size 3 in dimension 1; expected 4",
                           lambda: call(topk_w=p["topk_w"][:, :3]))
        self.assert_raises(ValueError, "w_down [16, 256, 64] has size 64 in dimension 2; expected 128",
                           lambda: call(w_down=p["w_down"][:, :, :64]))
        self.assert_raises(ValueError, "w_gate_up [16, 255, 256] has an odd size",
                           lambda: call(w_gate_up=p["w_gate_up"][:, :255]))
        self.assert_raises(TypeError, "topk_idx has dtype torch.float32", lambda: call(topk_idx=p["topk_idx"].float()))
        self.assert_raises(ValueError, "impl = 'fast'", lambda: call(kw={"impl": "fast"}))
        self.assert_raises(ValueError, "num_sms = -1", lambda: call(kw={"num_sms": -1}))
        self.assert_raises(TypeError, "grad_dtype = torch.float16", lambda: call(kw={"grad_dtype": torch.float16}))
        cpu = problem(device="cpu")
        self.assert_raises(ValueError, "x is on cpu", lambda: detmoe.moe_stacked(
            cpu["x"], cpu["topk_idx"], cpu["topk_w"], cpu["w_gate_up"], cpu["w_down"]))
        # The compiled op checks for itself when called directly.
        self.assert_raises(ValueError, "x is on cpu", lambda: torch.ops.detmoe.forward(
            cpu["x"], cpu["topk_idx"], cpu["topk_w"], cpu["w_gate_up"], cpu["w_down"], None, None, "auto", 0, True, True,
            False))
        self.assert_raises(ValueError, "shared expert needs both", lambda: detmoe.moe_stacked(
            p["x"], p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"], torch.empty(128, 256, device="meta",
                                                                                          dtype=torch.bfloat16)))

    def test_shape_rules_are_checked_before_the_compiled_op(self):
        # H not a multiple of 64, k > E: Python raises (named), the compiled op is never reached.
        p = problem(H=256, device="meta")
        bad_h = {**p, "x": torch.empty(300, 100, dtype=torch.bfloat16, device="meta"),
                 "w_gate_up": torch.empty(16, 256, 100, dtype=torch.bfloat16, device="meta"),
                 "w_down": torch.empty(16, 100, 128, dtype=torch.bfloat16, device="meta")}
        with self.assertRaises(ValueError) as c:
            detmoe.moe_stacked(bad_h["x"], p["topk_idx"], p["topk_w"], bad_h["w_gate_up"], bad_h["w_down"])
        self.assertIn("H = 100 must be a multiple of 64", str(c.exception))  # validate(Shape)'s words
        idx = torch.empty(300, 20, dtype=torch.int64, device="meta")
        w = torch.empty(300, 20, device="meta")
        with self.assertRaises(ValueError) as c:
            detmoe.moe_stacked(p["x"], idx, w, p["w_gate_up"], p["w_down"])
        self.assertIn("k = 20 exceeds E = 16", str(c.exception))
        # A signature checked once is not checked again, but a new one is.
        detmoe._checks._VALIDATED.clear()
        detmoe.moe_stacked(p["x"], p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"])
        self.assertEqual(len(detmoe._checks._VALIDATED), 1)

    def test_module_holds_nn_linear_layouts(self):
        m = detmoe.MoE(256, 128, 16, 4, shared_intermediate=64, device="meta")
        shapes = {n: tuple(t.shape) for n, t in m.named_parameters()}
        self.assertEqual(shapes, {"w_gate_up": (16, 256, 256), "w_down": (16, 256, 128), "ws_gate_up": (128, 256),
                                  "ws_down": (256, 64)})
        self.assertEqual(tuple(m.w_gate.shape), (16, 128, 256))
        self.assertEqual(m.w_up.data_ptr() - m.w_gate.data_ptr(), 128 * 256 * 4)  # views of one stacked tensor
        with self.assertRaises(ValueError):
            detmoe.MoE(256, 128, 4, 8)

    def test_auto_picks_reference_for_training_and_megakernel_under_capture(self):
        self.assertEqual(detmoe.resolve_impl(8192, 7168, 2048, 32, 8, backward=True), "reference")
        self.assertEqual(detmoe.resolve_impl(8192, 7168, 2048, 32, 8, capturing=True), "megakernel")
        self.assertEqual(detmoe.resolve_impl(16384, 2048, 768, 128, 8), "megakernel")
        self.assertEqual(detmoe.resolve_impl(8192, 7168, 2048, 32, 8), "reference")
        self.assertEqual(detmoe.resolve_impl(64, 256, 128, 16, 4, impl="megakernel", backward=True), "megakernel")


@unittest.skipUnless(HAS_GPU, NO_GPU)
class Gpu(unittest.TestCase):
    def check_against_fp64(self, p, grad_dtype, label, **kw):
        got = run(p, grad_dtype=grad_dtype, **kw)
        want, mag = fp64_layer.reference(p["x"], p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"],
                                         p["ws_gate_up"], p["ws_down"], p["dout"])
        worst = {}
        for name, w in want.items():
            worst[name] = fp64_layer.allowance_used(got[name], w, mag.get(name))
            self.assertLessEqual(worst[name], 1.0, f"{label}: {name} used {worst[name]:.2f} of its allowance")
        used = (p["topk_idx"].unique().long()).tolist()
        for e in set(range(p["w_gate_up"].shape[0])) - set(used):  # experts with no rows: exact zeros
            self.assertEqual(got["dw_gate_up"][e].abs().max().item(), 0.0, f"{label}: expert {e}")
            self.assertEqual(got["dw_down"][e].abs().max().item(), 0.0, f"{label}: expert {e}")
        print(f"  {label}: worst fraction of the allowance " + ", ".join(f"{n} {v:.2f}" for n, v in worst.items()))
        return got

    def test_gradients_match_an_fp64_layer(self):
        for Fs in (0, 64):
            for routing in ("uniform", "hot", "empty"):
                for grad_dtype in (torch.float32, torch.bfloat16):
                    p = problem(Fs=Fs, routing=routing, seed=Fs + len(routing))
                    self.check_against_fp64(p, grad_dtype, f"Fs={Fs} {routing} {grad_dtype}")

    def test_megakernel_training_step(self):
        # The fused backward from PyTorch (impl="megakernel"): every gradient against the fp64
        # layer, out bitwise the reference's, a rerun and save_h off bitwise the first run.
        for Fs, routing, grad_dtype in ((0, "uniform", torch.float32), (64, "hot", torch.bfloat16), (64, "empty", torch.float32)):
            p = problem(Fs=Fs, routing=routing, seed=40 + Fs)
            label = f"megakernel Fs={Fs} {routing} {grad_dtype}"
            first = self.check_against_fp64(p, grad_dtype, label, impl="megakernel")
            again = run(p, impl="megakernel", grad_dtype=grad_dtype)
            recomputed = run(p, impl="megakernel", grad_dtype=grad_dtype, save_h=False)
            for n in first:
                self.assertTrue(bitwise_equal(first[n], again[n]), f"{label}: {n} on a rerun")
                self.assertTrue(bitwise_equal(first[n], recomputed[n]), f"{label}: {n} with save_h off")
            ref = run(p, impl="reference", grad_dtype=grad_dtype)
            self.assertTrue(bitwise_equal(first["out"], ref["out"]), label)

    def test_fp32_master_weights_get_fp32_gradients(self):
        p = problem(wdtype=torch.float32, seed=5)
        got = run(p)
        self.assertEqual(got["dw_gate_up"].dtype, torch.float32)
        ref = run({**p, "w_gate_up": p["w_gate_up"].bfloat16(), "w_down": p["w_down"].bfloat16()})
        self.assertTrue(bitwise_equal(got["out"], ref["out"]))
        self.assertTrue(bitwise_equal(got["d_x"], ref["d_x"]))

    def test_opcheck(self):
        # torch's own check of a custom op's registration: schema (no undeclared mutation or
        # aliasing), fake tensors against real ones, autograd registration. Not its AOT-dispatch
        # check: that one compares every output of an eager call with a traced call's, and the
        # forward's second output is the autograd context's id, new on every call by design (on
        # the H200 it differed by 1 and nothing else did); the compiled path's bits are checked by
        # test_torch_compile_fullgraph_gives_the_eager_bits.
        p = problem(T=64, Fs=64, seed=21)
        args = (p["x"], p["topk_idx"], p["topk_w"].requires_grad_(), p["w_gate_up"].requires_grad_(), p["w_down"],
                p["ws_gate_up"], p["ws_down"], "reference", 0, True, True, True)
        torch.library.opcheck(torch.ops.detmoe.forward.default, args,
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))

    def test_rerun_is_bitwise_identical(self):
        p = problem(Fs=64, seed=7)
        first = run(p)
        torch.randn(4096, 4096, device="cuda") @ torch.randn(4096, 4096, device="cuda")  # other work between runs
        second = run(p)
        for n in first:
            self.assertTrue(bitwise_equal(first[n], second[n]), n)

    def test_num_sms_never_changes_bits(self):
        p = problem(Fs=64, seed=8)
        base = run(p, backward=False, impl="megakernel")
        for sms in (100, 66, 17, 1):
            other = run(p, backward=False, impl="megakernel", num_sms=sms)
            self.assertTrue(bitwise_equal(base["out"], other["out"]), f"num_sms={sms}")
        train = run(p)
        self.assertEqual(digest(train), digest(run(p, num_sms=17)))  # training takes the reference: no SM knob

    def test_megakernel_forward_equals_the_reference(self):
        for Fs, routing, T in ((0, "uniform", 300), (64, "hot", 1000), (0, "empty", 64), (64, "uniform", 1)):
            p = problem(T=T, Fs=Fs, routing=routing, seed=T)
            a = run(p, backward=False, impl="megakernel")["out"]
            b = run(p, backward=False, impl="reference")["out"]
            self.assertTrue(bitwise_equal(a, b), f"T={T} Fs={Fs} {routing}")

    def test_save_h_off_gives_the_same_bits(self):
        p = problem(Fs=64, seed=9)
        a, b = run(p), run(p, save_h=False)
        for n in a:
            self.assertTrue(bitwise_equal(a[n], b[n]), n)

    def test_two_forwards_before_their_backwards(self):
        # Two MoE blocks of one shape: each forward keeps its own layer until its backward.
        p1, p2 = problem(seed=11), problem(seed=12)
        alone1, alone2 = run(p1), run(p2)
        leaves = [{n: (p[n].detach().clone().requires_grad_() if p[n] is not None else None) for n in PARAMS}
                  for p in (p1, p2)]
        outs = [detmoe.moe_stacked(l["x"], p["topk_idx"], l["topk_w"], l["w_gate_up"], l["w_down"])
                for l, p in zip(leaves, (p1, p2))]
        self.assertRegex(detmoe.describe_pool(), r"reference: \d+ layers \(2 leased\)")
        torch.autograd.backward(outs, [p1["dout"], p2["dout"]])
        for l, alone in zip(leaves, (alone1, alone2)):
            self.assertTrue(bitwise_equal(l["x"].grad, alone["d_x"]))
            self.assertTrue(bitwise_equal(l["w_down"].grad, alone["dw_down"]))
        del outs, leaves
        self.assertIn("(0 leased)", detmoe.describe_pool())

    def test_torch_compile_fullgraph_gives_the_eager_bits(self):
        p = problem(Fs=64, seed=13)

        def step(x, idx, w, wgu, wd, wsgu, wsd):
            return detmoe.moe_stacked(x, idx, w, wgu, wd, wsgu, wsd)

        compiled = torch.compile(step, fullgraph=True)
        eager = run(p)
        leaves = {n: p[n].detach().clone().requires_grad_() for n in PARAMS}
        out = compiled(leaves["x"], p["topk_idx"], leaves["topk_w"], leaves["w_gate_up"], leaves["w_down"],
                       leaves["ws_gate_up"], leaves["ws_down"])
        out.backward(p["dout"])
        self.assertTrue(bitwise_equal(out.detach(), eager["out"]))
        self.assertTrue(bitwise_equal(leaves["x"].grad, eager["d_x"]))
        self.assertTrue(bitwise_equal(leaves["w_gate_up"].grad, eager["dw_gate_up"]))
        self.assertTrue(bitwise_equal(leaves["ws_down"].grad, eager["dws_down"]))

    def test_cuda_graph_capture_of_a_forward_replays_the_eager_bits(self):
        p = problem(Fs=64, seed=14)
        static = {n: (p[n].clone() if p[n] is not None else None) for n in p}
        args = lambda: (static["x"], static["topk_idx"], static["topk_w"], static["w_gate_up"], static["w_down"],
                        static["ws_gate_up"], static["ws_down"])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            detmoe.moe_stacked(*args())  # warm-up: makes the layer outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            out = detmoe.moe_stacked(*args())
        for seed in range(10):
            q = problem(Fs=64, seed=100 + seed)
            for n in static:
                static[n].copy_(q[n])
            graph.replay()
            want = run(q, backward=False, impl="megakernel")["out"]
            self.assertTrue(bitwise_equal(out, want), f"replay {seed}")

    def test_capturing_a_training_step_is_refused_with_the_reason(self):
        p = problem(seed=15)
        x = p["x"].clone().requires_grad_()
        graph = torch.cuda.CUDAGraph()
        with self.assertRaises(NotImplementedError) as caught:
            with torch.cuda.graph(graph):
                detmoe.moe_stacked(x, p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"])
        self.assertIn("cannot be captured", str(caught.exception))

    # Each bad argument is its own test: ci/run-op-tests.sh runs every test in its own process, so
    # a crash (exit 139 was seen on the H200 for a misaligned x) names its case and the others run.
    def assert_value_error(self, fragment, fn):
        with self.assertRaises(ValueError) as c:
            fn()
        self.assertIn(fragment, str(c.exception))
        print("  raised:", str(c.exception).splitlines()[0][:160])

    def test_misaligned_x_raises(self):
        p = problem(seed=16)
        flat = torch.empty(300 * 256 + 1, dtype=torch.bfloat16, device="cuda")
        self.assert_value_error("not 16-byte aligned", lambda: detmoe.moe_stacked(
            flat[1:].view(300, 256), p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"]))

    def test_noncontiguous_x_raises(self):
        p = problem(seed=16)
        self.assert_value_error("x [300, 256] is not contiguous", lambda: detmoe.moe_stacked(
            p["x"].T.contiguous().T, p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"]))

    def test_misaligned_x_raises_from_the_compiled_op(self):
        p = problem(seed=16)
        flat = torch.empty(300 * 256 + 1, dtype=torch.bfloat16, device="cuda")
        with torch.no_grad():
            self.assert_value_error("not 16-byte aligned", lambda: torch.ops.detmoe.forward(
                flat[1:].view(300, 256), p["topk_idx"], p["topk_w"], p["w_gate_up"], p["w_down"], None, None, "auto",
                0, True, False, False))

    def test_topk_w_on_another_device_raises(self):
        p = problem(seed=16)
        self.assert_value_error("topk_w is on cpu", lambda: detmoe.moe_stacked(
            p["x"], p["topk_idx"], p["topk_w"].cpu(), p["w_gate_up"], p["w_down"]))

    def test_expert_id_out_of_range_raises_in_training(self):
        p = problem(seed=16)
        bad = p["topk_idx"].clone()
        bad[7, 2] = 16
        x = p["x"].clone().requires_grad_()
        # The reference path (training) reports it at the call.
        self.assert_value_error("topk_idx", lambda: detmoe.moe_stacked(x, bad, p["topk_w"], p["w_gate_up"],
                                                                       p["w_down"]))
        bad[7, 2] = (1 << 32) + 3  # int64 ids are never wrapped into range
        self.assert_value_error("topk_idx", lambda: detmoe.moe_stacked(x, bad, p["topk_w"], p["w_gate_up"],
                                                                       p["w_down"]))
        run(p)  # the layer works again

    def test_expert_id_out_of_range_surfaces_at_synchronize_on_the_megakernel(self):
        p = problem(seed=16)
        bad = p["topk_idx"].clone()
        bad[7, 2] = 16
        with torch.no_grad():  # the megakernel path records the fault; synchronize() raises it
            detmoe.moe_stacked(p["x"], bad, p["topk_w"], p["w_gate_up"], p["w_down"], impl="megakernel")
        self.assert_value_error("topk_idx", detmoe.synchronize)
        detmoe.synchronize()  # reported once
        run(p, backward=False, impl="megakernel")  # the layer works again

    def test_empty_batch(self):
        p = problem(T=0, seed=17)
        got = run(p)
        self.assertEqual(tuple(got["out"].shape), (0, 256))
        self.assertEqual(got["dw_gate_up"].abs().max().item(), 0.0)

    def test_batch_invariance(self):
        full = problem(T=1024, Fs=64, seed=18)
        rows = torch.tensor([0, 1, 5, 77, 500, 1023], device="cuda")
        sub = {n: (t[rows] if n in ("x", "topk_idx", "topk_w", "dout") else t) for n, t in full.items()}
        other = dict(full)
        other["x"] = full["x"].clone()
        keep = torch.zeros(1024, dtype=torch.bool, device="cuda")
        keep[rows] = True
        other["x"][~keep] = problem(T=1024, seed=19)["x"][~keep]
        report = []
        for label, backward, impl in (("training (reference)", True, "auto"), ("no-grad megakernel", False, "megakernel"),
                                      ("no-grad reference", False, "reference")):
            a, b, c = run(full, backward, impl=impl), run(sub, backward, impl=impl), run(other, backward, impl=impl)
            for name in ("out", "d_x", "d_topk_w") if backward else ("out",):
                same_subset = bitwise_equal(a[name][rows], b[name])
                same_others = bitwise_equal(a[name][rows], c[name][rows])
                report.append(f"{label} {name}: subset {same_subset}, other tokens changed {same_others}")
                self.assertTrue(same_subset and same_others, report[-1])
        print("  " + "\n  ".join(report))

    def test_outputs_equal_detmoe_run_on_the_same_safetensors(self):
        binary = os.environ.get("DETMOE_BINARY")
        if not binary or not os.path.exists(binary):
            self.skipTest("DETMOE_BINARY (the detmoe CLI) is not set")
        from safetensors.torch import load_file, save_file
        p = problem(Fs=64, seed=20)
        F = p["w_gate_up"].shape[1] // 2
        # fp32 master weights holding bf16 values: the op's fp32 gradients are then `detmoe run`'s
        # (--grad-dtype fp32, its default); the bf16 weights' own gradients are compared with
        # `detmoe run --grad-dtype bf16` below.
        p32 = {n: (t.float() if n.startswith("w") and t is not None else t) for n, t in p.items()}
        tensors = {"x": p["x"], "topk_idx": p["topk_idx"], "topk_w": p["topk_w"].float(),
                   "w_gate": p["w_gate_up"][:, :F], "w_up": p["w_gate_up"][:, F:], "w_down": p["w_down"],
                   "ws_gate": p["ws_gate_up"][:64], "ws_up": p["ws_gate_up"][64:], "ws_down": p["ws_down"],
                   "dout": p["dout"]}
        mine = run(p32)
        mine16 = run(p)
        mine_fwd = run(p, backward=False, impl="megakernel")
        with tempfile.TemporaryDirectory() as tmp:
            save_file({n: t.contiguous().cpu() for n, t in tensors.items()}, f"{tmp}/in.safetensors")
            for impl, name, extra in (("reference", "reference", []), ("reference", "bf16", ["--grad-dtype", "bf16"]),
                                      ("megakernel", "megakernel", ["--forward-only"])):
                subprocess.run([binary, "run", "--impl", impl, "--inputs", f"{tmp}/in.safetensors", "--outputs",
                                f"{tmp}/{name}.safetensors", *extra], check=True, capture_output=True)
            ref = load_file(f"{tmp}/reference.safetensors")
            ref16 = load_file(f"{tmp}/bf16.safetensors")
            mk = load_file(f"{tmp}/megakernel.safetensors")
        cpu = lambda t: t.detach().cpu()
        pairs = {"out": (mine["out"], ref["out"]), "d_x": (mine["d_x"], ref["d_x"]),
                 "d_topk_w": (mine["d_topk_w"], ref["d_topk_w"]),
                 "dw_gate": (mine["dw_gate_up"][:, :F], ref["dw_gate"]), "dw_up": (mine["dw_gate_up"][:, F:], ref["dw_up"]),
                 "dw_down": (mine["dw_down"], ref["dw_down"]), "dws_gate": (mine["dws_gate_up"][:64], ref["dws_gate"]),
                 "dws_down": (mine["dws_down"], ref["dws_down"]), "megakernel out": (mine_fwd["out"], mk["out"]),
                 "bf16 dw_down": (mine16["dw_down"], ref16["dw_down"]), "bf16 d_x": (mine16["d_x"], ref16["d_x"]),
                 "bf16 dw_up": (mine16["dw_gate_up"][:, F:], ref16["dw_up"])}
        rounded = bitwise_equal(mine["dw_gate_up"].bfloat16(), mine16["dw_gate_up"])
        print(f"  bf16 weight gradients = the fp32 ones rounded to bf16: {rounded}")
        for name, (a, b) in pairs.items():
            self.assertTrue(bitwise_equal(cpu(a), b), name)

    def test_training_example_is_bitwise_reproducible(self):
        script = os.path.join(SOURCE, "examples", "train_tiny_moe.py")
        outs = []
        for sms in (0, 0, 66, 17):
            r = subprocess.run([sys.executable, script, "--steps", "50", "--num-sms", str(sms), "--no-pipeline"],
                               check=True, capture_output=True, text=True)
            outs.append([l for l in r.stdout.splitlines() if l.startswith("detmoe ")][-1])
        print("  " + "\n  ".join(outs))
        self.assertEqual(len(set(o.split(" num_sms")[0] for o in outs)), 1, outs)


if __name__ == "__main__":
    unittest.main()
