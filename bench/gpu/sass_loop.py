"""The hot loop of a kernel in sm_90 SASS, and its instructions by pipe
(bench/gpu/sass_budget.py's counting half; no GPU needed).

The input is `cuobjdump -sass` of a cubin. A kernel's hot path is found the
way /work/shared/gpu/DESK-CHECK.md §1.1 counted it by hand:

- the main loop is the grid-stride loop: of the backward branches, the one
  whose body holds the kernel's widest global store (STG.E.128: the 16-byte
  store of 8 BF16 outputs, common.cuh `store_bf16`), the longest if several;
- the hot path is one trip through that body from its first instruction to
  the backward branch, through a widest store (through as many as a trip
  has: the most bytes stored, e.g. the two groups a trip of the legacy
  kernels, whose slow paths are calls) and through no narrower global
  store (that excludes the 8 x STG.E.U16 fallback for unaligned outputs),
  through a widest load (the aligned vector load where there is one),
  converting as many outputs as the store writes (the `count == 8` group),
  through both sides of every lane-divergent `if` (`fold_selects`), and
  otherwise the cheapest way at every branch (the one-scale group, the
  finite-scale path: each fast case is the shorter code);
- an inner loop on that path (a `for (j < count)` nvcc did not unroll; none
  in today's kernels, whose count loops all unroll) is counted once per trip; its trips are the outputs per iteration divided by
  the outputs one trip converts, which is the number of NaN tests in its
  body (every f32 -> BF16 conversion, common.cuh `f32_to_bf16`, compares its
  magnitude with 0x7f800000 once).

Outputs per iteration come from the stores: bytes stored on the hot path / 2
(BF16). Predicated instructions count as issued (they are).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# Pipes, after the desk check (§1.1) and ncu's pipe names for sm_90. ALU:
# the 16-lane integer/logic pipe (half the issue rate); FMA: fmaheavy +
# fmalite (FP32 and IMAD; IMAD only on the 16-lane heavy half); XU: the
# transcendental and conversion unit; MEM: load/store; the rest (branches,
# barriers, uniform-datapath instructions) issue but use none of these.
ALU = {"LOP3", "LOP", "SHF", "SHL", "SHR", "IADD3", "IADD", "ISETP", "PRMT", "SEL", "LEA", "I2FP", "F2FP", "FSEL",
       "FSETP", "FMNMX", "IMNMX", "VIMNMX", "IABS", "POPC", "FLO", "BREV", "PLOP3", "P2R", "R2P", "MOV", "BMSK",
       "SGXT", "FCHK", "ISCADD"}
FMA = {"FMUL", "FADD", "FFMA", "FMUL32I", "FADD32I", "FFMA32I", "HADD2", "HMUL2", "HFMA2", "VIADD", "IMUL"}
IMAD_PREFIX = "IMAD"  # IMAD, IMAD.MOV, IMAD.WIDE, IMAD.SHL, IMAD.IADD, IMAD.U32: the heavy FMA half
XU = {"I2F", "F2I", "MUFU", "F2F", "FRND"}
MEM_PREFIX = ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LD", "ST", "ATOM", "RED", "LDC")
STORE_BYTES = {"128": 16, "64": 8, "U16": 2, "S16": 2, "U8": 1, "S8": 1}

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
FUNC = re.compile(r"Function : (\S+)")


@dataclass
class Insn:
    addr: int
    pred: str
    op: str
    args: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]

    def pipe(self) -> str:
        b = self.base  # I2FP (ALU) and I2F (XU) are different bases
        if b in ALU:
            return "alu"
        if b.startswith(IMAD_PREFIX):
            return "imad"
        if b in FMA:
            return "fma"
        if b in XU:
            return "xu"
        if b.startswith(MEM_PREFIX) and not b.startswith("LDC"):
            return "mem"
        return "other"

    def store_bytes(self) -> int:
        """Bytes a global store writes (STG.E is 4), 0 for anything else."""
        if self.base != "STG":
            return 0
        for part in reversed(self.op.split(".")[1:]):
            if part in STORE_BYTES:
                return STORE_BYTES[part]
        return 4

    def load_bytes(self) -> int:
        """Bytes a global load reads (LDG.E is 4), 0 for anything else."""
        if self.base != "LDG":
            return 0
        for part in reversed(self.op.split(".")[1:]):
            if part in STORE_BYTES:
                return STORE_BYTES[part]
        return 4

    def branch_target(self) -> int | None:
        if self.base not in ("BRA", "JMP"):
            return None
        m = re.search(r"0x([0-9a-f]+)", self.args)
        return int(m.group(1), 16) if m else None

    def conditional(self) -> bool:
        return bool(self.pred) and self.pred.strip() not in ("@PT",)


def conversions(x: Insn) -> int:
    """BF16 outputs an instruction rounds: the NaN test every f32 -> BF16
    conversion makes (common.cuh `f32_to_bf16` compares |x| with
    0x7f800000), or a packed F2FP.BF16 (two)."""
    if x.base == "ISETP" and "0x7f800000" in x.args:
        return 1
    return 2 if x.op.startswith("F2FP.BF16") else 0


def parse(sass: str) -> dict[str, list[Insn]]:
    """`cuobjdump -sass` text -> {function: instructions in address order}."""
    funcs: dict[str, list[Insn]] = {}
    cur: list[Insn] | None = None
    for line in sass.splitlines():
        m = FUNC.search(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = LINE.search(line)
        if m and cur is not None:
            cur.append(Insn(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return funcs


@dataclass
class Block:
    start: int
    insns: list[Insn]
    succ: list[int] = field(default_factory=list)


def blocks(insns: list[Insn]) -> dict[int, Block]:
    """Basic blocks by start address, with their successors."""
    leaders = {insns[0].addr}
    for i, x in enumerate(insns):
        t = x.branch_target()
        if t is not None:
            leaders.add(t)
        if (t is not None or x.base in ("EXIT", "RET")) and i + 1 < len(insns):
            leaders.add(insns[i + 1].addr)
    out: dict[int, Block] = {}
    cur: Block | None = None
    for x in insns:
        if x.addr in leaders:
            cur = out[x.addr] = Block(x.addr, [])
        cur.insns.append(x)
    starts = sorted(out)
    for k, s in enumerate(starts):
        last = out[s].insns[-1]
        nxt = starts[k + 1] if k + 1 < len(starts) else None
        t = last.branch_target()
        ends = last.base in ("EXIT", "RET") or t is not None
        if t is not None:
            out[s].succ.append(t)
        if nxt is not None and (not ends or last.conditional()):
            out[s].succ.append(nxt)
    return out


def back_edges(bb: dict[int, Block]) -> list[tuple[int, int]]:
    """(latch block start, loop header start) for each backward branch."""
    return [(s, t) for s, b in bb.items() for t in b.succ if t <= s]


def fold_selects(bb: dict[int, Block], body: list[int]) -> dict[int, Block]:
    """Blocks with every lane-divergent `if` folded into its branch block.

    A branch whose sides rejoin at J without converting or storing anything
    (no global access either, unless one side is empty) selects per lane or
    per element: tq1_0's digit position (lane-dependent: a warp holds all
    three cases), e4m3's subnormal fix-up, the scale load when there are
    scales. A warp runs every side some lane needs, so both sides count:
    they join the branch block, which then goes straight to J. Innermost
    first (descending addresses), so nested selects fold into outer ones.
    Sides that convert or store are real alternatives (the aligned load,
    the one-scale group, the count < 8 exits): `hot_path` chooses there."""
    bb = {k: Block(v.start, list(v.insns), list(v.succ)) for k, v in bb.items()}
    live = set(body)

    def reach(s: int) -> set[int]:
        seen, todo = set(), [s]
        while todo:
            x = todo.pop()
            if x in seen or x not in live:
                continue
            seen.add(x)
            todo += [t for t in bb[x].succ if t > x]
        return seen

    for a in sorted(body, reverse=True):
        if a not in live or len(bb[a].succ) != 2 or min(bb[a].succ) <= a:
            continue
        r1, r2 = (reach(t) for t in bb[a].succ)
        common = r1 & r2
        if not common:
            continue
        j = min(common)
        sides = sorted(x for x in r1 | r2 if x < j)
        hammock = j in bb[a].succ
        ok = all(
            conversions(x) == 0 and x.store_bytes() == 0 and (hammock or x.pipe() != "mem")
            for s in sides for x in bb[s].insns)
        if not ok or any(t > j or t <= s for s in sides for t in bb[s].succ if t != j):
            continue
        for s in sides:
            bb[a].insns += bb[s].insns
            live.discard(s)
        bb[a].succ = [j]
    return {k: v for k, v in bb.items() if k in live or k not in body}


@dataclass
class HotPath:
    insns: list[Insn]  # in path order, inner loops repeated
    outputs: int  # BF16 outputs per iteration (bytes stored / 2)
    inner_trips: list[int]


def hot_path(insns: list[Insn], tests_per_output: int = 1) -> HotPath:
    bb = blocks(insns)
    widest = max((x.store_bytes() for x in insns), default=0)
    if not widest:
        raise ValueError("no global store")
    has_wide = {s for s, b in bb.items() if any(x.store_bytes() == widest for x in b.insns)}
    narrow = {s for s, b in bb.items() if any(0 < x.store_bytes() < widest for x in b.insns)}
    loops = [(l, h) for l, h in back_edges(bb) if any(h <= s <= l for s in has_wide)]
    if not loops:
        raise ValueError("no loop around the widest store")
    # The longest by the latch's last instruction (its backward branch): a
    # loop whose body is one long block after its header's branch (no call
    # splitting it) is still the longest.
    latch, header = max(loops, key=lambda e: bb[e[0]].insns[-1].addr - e[1])
    body = sorted(s for s in bb if header <= s <= latch)
    inner = [(l, h) for l, h in back_edges(bb) if header <= h and l <= latch and (l, h) != (latch, header)]

    bb = fold_selects(bb, body)
    body = [s for s in body if s in bb]
    in_body = set(body)
    widest_load = max((x.load_bytes() for s in body for x in bb[s].insns), default=0)
    need = {s: (1 if s in has_wide else 0) | (2 if any(x.load_bytes() == widest_load for x in bb[s].insns) else 0)
            for s in body}
    # The full-group path: the most BF16 conversions (an unrolled `for (j <
    # count)` leaves its chain early when count < 8), up to the outputs one
    # widest store writes (counting past them would prefer an optional extra
    # rounding) times `tests_per_output` (2 where the launch rounds through
    # F16 first: round_f16 makes the same NaN test); then the fewest
    # instructions. From the header to the latch through a widest store and
    # a widest load (mask bits 1 and 2), over forward edges only (a DAG in
    # address order), never through a narrower store. States: (block, mask,
    # conversions so far, capped).
    #
    # Before all that, the most bytes stored: a loop that converts two
    # groups a trip (kernels/cuda/legacy.cu) has a path through both
    # groups' stores and cheaper ones that leave one group to an
    # out-of-line slow path (a call, no store in the loop); the trip is the
    # path through every store. (With one store a trip, every candidate
    # stores the same bytes: the choice is as before.)
    target = widest // 2 * tests_per_output
    conv = {s: sum(conversions(x) for x in bb[s].insns) for s in body}
    stored = {s: sum(x.store_bytes() for x in bb[s].insns) for s in body}
    start = (header, need[header], min(target, conv[header]), stored[header])
    cost = {start: len(bb[header].insns)}
    prev: dict[tuple, tuple] = {}
    for s in body:
        for state in [k for k in cost if k[0] == s]:
            for t in bb[s].succ:
                if t <= s or t not in in_body or t in narrow:
                    continue
                nxt = (t, state[1] | need[t], min(target, state[2] + conv[t]), state[3] + stored[t])
                c = cost[state] + len(bb[t].insns)
                if c < cost.get(nxt, 1 << 30):
                    cost[nxt], prev[nxt] = c, state
    ends = [k for k in cost if k[0] == latch and k[1] == 3]
    if not ends:
        raise ValueError("no path through the widest store and load")
    end = max(ends, key=lambda k: (k[3], k[2], -cost[k]))
    states = [end]
    while states[-1] in prev:
        states.append(prev[states[-1]])
    path = [k[0] for k in reversed(states)]
    out: list[Insn] = [x for s in path for x in bb[s].insns]
    outputs = sum(x.store_bytes() for x in out) // 2
    trips = []
    for l, h in inner:
        if h in path:
            loop_insns = [x for s in body if h <= s <= l for x in bb[s].insns]
            per_trip = sum(conversions(x) for x in loop_insns) or 1
            n = max(1, outputs * tests_per_output // per_trip)
            trips.append(n)
            out += loop_insns * (n - 1)
    return HotPath(out, outputs, trips)


def per_output(path: HotPath) -> dict[str, float]:
    """Instructions per output: in all, and by pipe."""
    counts = {"total": 0.0, "alu": 0.0, "fma": 0.0, "imad": 0.0, "xu": 0.0, "mem": 0.0, "other": 0.0}
    for x in path.insns:
        counts["total"] += 1
        counts[x.pipe()] += 1
    return {k: v / path.outputs for k, v in counts.items()}
