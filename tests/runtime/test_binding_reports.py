"""Silent copies, told to the user: per bound input and output,
whether the device reads our memory or a copy, with the evidence; the NPU
options users ask for reach the plugin, and fail in one sentence without an
NPU."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

import npu_zc
from npu_zc import DeviceNotFoundError
from npu_zc.runtime import BindingReport, CompileOptions, compile_model, is_available
from npu_zc.runtime.binding import report

F32 = CompileOptions(inference_precision="f32", num_threads=1)


@pytest.fixture(scope="module")
def session():  # type: ignore[no-untyped-def]
    return compile_model("efficientnet-lite0", "CPU", options=F32)


def test_session_reports_our_memory_on_the_cpu(session) -> None:  # type: ignore[no-untyped-def]
    reports = session.binding_report(heap="memfd")
    assert [r.port.split(" (")[0] for r in reports] == ["input 0", "output 0"]
    for r in reports:
        assert isinstance(r, BindingReport)
        assert r.reads == "our memory" and "address" in r.evidence and r.buffer == "memfd"


def test_request_reports_our_memory_after_inference_and_a_copy_when_unbound(session) -> None:  # type: ignore[no-untyped-def]
    request = session.create_request()
    with npu_zc.alloc(session.inputs[0].nbytes, "memfd") as a, npu_zc.alloc(session.outputs[0].nbytes, "memfd") as b:
        x = request.bind_input(a)
        y = request.bind_output(b)
        x[...] = 0
        request.infer()
        assert [r.reads for r in request.binding_report()] == ["our memory", "our memory"]
        del x, y
        request.unbind()
    assert [r.reads for r in request.binding_report()] == ["a copy", "a copy"]


def test_a_tensor_over_other_memory_is_reported_as_a_copy(session) -> None:  # type: ignore[no-untyped-def]
    """The check can fail: a request whose tensor is not our mapping says so."""
    import openvino as ov

    spec = session.inputs[0]
    with npu_zc.alloc(spec.nbytes, "memfd") as buf:
        from npu_zc.runtime.binding import bind

        bound = bind("CPU", None, spec, buf)
        elsewhere = ov.Tensor(np.zeros(spec.shape, spec.dtype))
        r = report("CPU", "input", 0, bound, elsewhere)
        assert r.reads == "a copy" and "other memory" in r.evidence
        del bound


def test_queue_and_copy_mode_reports(session) -> None:  # type: ignore[no-untyped-def]
    with session.queue(depth=2, heap="memfd") as queue:
        assert {r.reads for r in queue.binding_report()} == {"our memory"}
    copy = compile_model("efficientnet-lite0", "CPU", mode="copy", options=F32)
    assert {r.reads for r in copy.binding_report()} == {"a copy"}


def test_a_device_we_cannot_check_says_so(session) -> None:  # type: ignore[no-untyped-def]
    from npu_zc.runtime.binding import bind

    spec = session.inputs[0]
    with npu_zc.alloc(spec.nbytes, "memfd") as buf:
        bound = bind("CPU", None, spec, buf)
        r = report("HETERO:CPU", "input", 0, bound)
        assert r.reads == "unknown" and "count-copies" in r.evidence
        del bound


@pytest.mark.skipif(is_available("NPU"), reason="an NPU is here: the options are accepted")
@pytest.mark.parametrize(
    "option",
    [dict(npu_turbo=True), dict(npu_enable_strides_for="image"), dict(run_inferences_sequentially=True)],
    ids=lambda o: next(iter(o)),
)
def test_npu_options_without_an_npu_fail_in_one_sentence(option: dict) -> None:
    import dataclasses

    with pytest.raises(DeviceNotFoundError) as info:
        compile_model("efficientnet-lite0", "AUTO", options=dataclasses.replace(F32, **option))
    message = str(info.value)
    assert "NPU option" in message and "\n" not in message


def test_npu_options_map_to_the_plugins_keys() -> None:
    options = CompileOptions(performance_hint=None, npu_turbo=True, npu_enable_strides_for="image",
                             run_inferences_sequentially=True)  # fmt: skip
    config, ignored = options.to_config(["NPU_TURBO", "NPU_ENABLE_STRIDES_FOR", "RUN_INFERENCES_SEQUENTIALLY"])
    assert config == {"NPU_TURBO": "YES", "NPU_ENABLE_STRIDES_FOR": "image", "RUN_INFERENCES_SEQUENTIALLY": "YES"}
    assert ignored == {}
