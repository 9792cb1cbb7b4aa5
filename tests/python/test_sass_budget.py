"""bench/gpu/sass_budget.py without nvcc: the hot-path count on a small
hand-written SASS listing, and the test command's ratchet on made-up
predictions (the real run, which compiles the kernels, is scripts/test.sh's
sass-budget step)."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import sass_budget  # noqa: E402
import sass_loop  # noqa: E402

# A grid-stride loop (0x30 .. 0x100) in cuobjdump's layout: a one-sided
# `if` (0x60, per element: counted), one NaN test, an aligned STG.E.128 and
# the unaligned 2 x STG.E.U16 fallback (not counted).
TOY = """
\t\tFunction : ws_toy
        /*0000*/                   S2R R0, SR_TID.X ;                          /* 0x0000000000007919 */
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   LDG.E.64.CONSTANT R2, desc[UR4][R4.64] ;
        /*0040*/                   LOP3.LUT P1, RZ, R2, 0x7, RZ, 0xc0, !PT ;
        /*0050*/              @!P1 BRA 0x70 ;
        /*0060*/                   FSEL R2, R2, R3, P1 ;
        /*0070*/                   ISETP.GT.U32.AND P2, PT, R2, 0x7f800000, PT ;
        /*0080*/                   LOP3.LUT P0, RZ, R6, 0xf, RZ, 0xc0, !PT ;
        /*0090*/               @P0 BRA 0xc0 ;
        /*00a0*/                   STG.E.128 desc[UR4][R6.64], R8 ;
        /*00b0*/                   BRA 0xe0 ;
        /*00c0*/                   STG.E.U16 desc[UR4][R6.64], R8 ;
        /*00d0*/                   STG.E.U16 desc[UR4][R6.64+0x2], R9 ;
        /*00e0*/                   IMAD.IADD R0, R0, 0x1, R7 ;
        /*00f0*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0100*/              @!P0 BRA 0x30 ;
        /*0110*/                   EXIT ;
        /*0120*/                   BRA 0x120;
"""


def test_hot_path_counts_the_loop_once_through_the_wide_store():
    path = sass_loop.hot_path(sass_loop.parse(TOY)["ws_toy"])
    assert path.outputs == 8
    assert [x.addr for x in path.insns] == [0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xE0, 0xF0, 0x100]
    per = sass_loop.per_output(path)
    # LOP3 x 2, FSEL, ISETP x 2 on the ALU; IMAD.IADD on the FMA heavy half.
    assert per["alu"] == 5 / 8 and per["imad"] == 1 / 8 and per["total"] == 12 / 8


# Two groups a trip (kernels/cuda/legacy.cu): each group stores 16 bytes
# on its fast path, or calls an out-of-line slow path (no store in the
# loop). The hot path is the one through both stores, though the ones
# through a call are shorter.
TWO = """
		Function : ws_two
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   LDG.E.U16.CONSTANT R2, desc[UR4][R4.64] ;
        /*0020*/                   LDG.E.U16.CONSTANT R3, desc[UR4][R4.64+0x2] ;
        /*0030*/                   ISETP.NE.AND P0, PT, R2, 0x7c00, PT ;
        /*0040*/              @!P0 BRA 0x80 ;
        /*0050*/                   LOP3.LUT R8, R2, 0xf, RZ, 0xc0, !PT ;
        /*0060*/                   STG.E.128 desc[UR4][R6.64], R8 ;
        /*0070*/                   BRA 0x90 ;
        /*0080*/                   CALL.REL.NOINC 0x200 ;
        /*0090*/                   ISETP.NE.AND P0, PT, R3, 0x7c00, PT ;
        /*00a0*/              @!P0 BRA 0xe0 ;
        /*00b0*/                   LOP3.LUT R8, R3, 0xf, RZ, 0xc0, !PT ;
        /*00c0*/                   STG.E.128 desc[UR4][R6.64+0x10], R8 ;
        /*00d0*/                   BRA 0xf0 ;
        /*00e0*/                   CALL.REL.NOINC 0x200 ;
        /*00f0*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0100*/              @!P0 BRA 0x10 ;
        /*0110*/                   EXIT ;
"""


def test_hot_path_goes_through_every_store_of_a_trip():
    path = sass_loop.hot_path(sass_loop.parse(TWO)["ws_two"])
    assert path.outputs == 16
    assert [x.addr for x in path.insns] == [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x90, 0xA0, 0xB0, 0xC0, 0xD0,
                                            0xF0, 0x100]


def fake(fractions):
    return {k: {"predicted_fraction": f, "alu_per_output": 10.0, "budget": 9.8} for k, f in fractions.items()}


def check(tmp_path, monkeypatch, below, fractions):
    listed = tmp_path / "below.json"
    listed.write_text(json.dumps({"kernels": below}))
    monkeypatch.setattr(sass_budget, "BELOW", listed)
    monkeypatch.setattr(sass_budget.sass_build, "ROOT", tmp_path)
    return sass_budget.check(fake(fractions))


def test_ratchet_passes_listed_kernels_below_the_target(tmp_path, monkeypatch):
    assert check(tmp_path, monkeypatch, {"q4_0": 0.613}, {"q4_0": 0.613, "f32": 1.0}) == 0


def test_ratchet_fails_an_unlisted_kernel_below_the_target(tmp_path, monkeypatch, capsys):
    assert check(tmp_path, monkeypatch, {}, {"q4_0": 0.613, "f32": 1.0}) == 1
    assert "q4_0: predicted 0.61 of D2D, under 0.9" in capsys.readouterr().err


def test_ratchet_fails_a_listed_kernel_that_reached_the_target(tmp_path, monkeypatch, capsys):
    assert check(tmp_path, monkeypatch, {"q4_0": 0.613}, {"q4_0": 0.93}) == 1
    assert "remove it from" in capsys.readouterr().err


def test_ratchet_fails_a_listed_kernel_that_got_slower(tmp_path, monkeypatch, capsys):
    assert check(tmp_path, monkeypatch, {"q4_0": 0.613}, {"q4_0": 0.55}) == 1
    assert "a slower kernel" in capsys.readouterr().err


def test_ratchet_fails_a_listed_name_that_is_no_kernel(tmp_path, monkeypatch):
    assert check(tmp_path, monkeypatch, {"q4_0": 0.613, "q9_9": 0.5}, {"q4_0": 0.613}) == 1


def test_ratchet_fails_a_listed_kernel_whose_gain_is_not_recorded(tmp_path, monkeypatch, capsys):
    assert check(tmp_path, monkeypatch, {"q4_0": 0.613}, {"q4_0": 0.70}) == 1
    assert "record the new number" in capsys.readouterr().err
