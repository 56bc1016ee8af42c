"""One finding per cause, and which came first: a finding while the scan runs (_Hit), the merging of the
lines of one error into one finding, wrappers given to what they wrap, and the cause/consequence roles."""

from __future__ import annotations

from dataclasses import dataclass, field

from ascend_ready.checks.diagnose.extract import Actor, _ts_cmp, _ts_key
from ascend_ready.checks.diagnose.model import LAYER_ORDER, Entry, Evidence, Finding
from ascend_ready.checks.diagnose.vendor import load_vendor_graph

MAX_EVIDENCE = 20
#: Lines of one process's output this close together belong to one error report (a RuntimeError, the
#: CANN error lines and the TraceBack CANN prints under them): ordered by layer, merged by code.
BLOCK_LINES = 30


@dataclass(eq=False)  # compared by identity: two hits are never "equal"
class _Hit:
    """A finding while the scan runs: keyed by entry, code and the actor as the line named it."""

    entry: Entry
    code: str
    title: str
    actor: Actor | None
    file_idx: int
    seq: int
    kind: str
    layer: str
    node: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # scan sequence of each evidence line
    lines: list[int] = field(default_factory=list)  # line number of each evidence line
    matches: int = 0
    ts: _ts_key | None = None
    ts_text: str | None = None
    first_line: int = 0
    last_line: int = 0

    def add(self, ev: Evidence, seq: int) -> None:
        self.matches += 1
        self.last_line = max(self.last_line, ev.line)
        if len(self.evidence) < MAX_EVIDENCE:
            at = len(self.order)
            while at and self.order[at - 1] > seq:  # a line given later (a wrapper's) keeps log order
                at -= 1
            self.evidence.insert(at, ev)
            self.order.insert(at, seq)
            self.lines.insert(at, ev.line)

    def absorb(self, other: _Hit) -> None:
        """Take another hit's lines (the same error seen from another line or file); a line both matched
        is counted once."""
        have = {(e.file, e.line) for e in self.evidence}
        theirs = [t for t in zip(other.order, other.evidence, other.lines, strict=True)
                  if (t[1].file, t[1].line) not in have]
        mine = zip(self.order, self.evidence, self.lines, strict=True)
        triples = sorted([*mine, *theirs], key=lambda t: t[0])
        self.order = [t[0] for t in triples[:MAX_EVIDENCE]]
        self.evidence = [t[1] for t in triples[:MAX_EVIDENCE]]
        self.lines = [t[2] for t in triples[:MAX_EVIDENCE]]
        self.matches += other.matches - (len(other.evidence) - len(theirs))
        self.last_line = max(self.last_line, other.last_line)
        if other.ts is not None and (self.ts is None or _ts_cmp(other.ts, self.ts) < 0):
            self.ts, self.ts_text = other.ts, other.ts_text
        self.node = self.node or other.node



# ---------------------------------------------------------------- one finding per cause


def _near(a: _Hit, b: _Hit) -> bool:
    """Some line of a and some line of b are in one error report of one file."""
    if a.file_idx != b.file_idx:
        return False
    return any(abs(x - y) <= BLOCK_LINES for x in a.lines for y in b.lines)


def _merge_unattributed(hits: list[_Hit]) -> list[_Hit]:
    """A line that names no actor (CANN's `EZ9999: Inner Error!` header) joins the same code's finding
    whose lines name one (the `EZ9999[PID: 1176] ...` detail under it)."""
    out: list[_Hit] = []
    for h in hits:
        if h.actor is None:
            into = next((g for g in hits if g is not h and g.actor is not None and g.entry.id == h.entry.id
                         and g.code == h.code and _near(g, h)), None)
            if into is not None:
                into.absorb(h)
                into.seq = min(into.seq, h.seq)
                continue
        out.append(h)
    return out


def _is_vendor(h: _Hit) -> bool:
    return h.entry.id.startswith("kg-")


def _drop_named_by_entries(hits: list[_Hit]) -> list[_Hit]:
    """A finding of the vendor's graph whose line an entry of ours (or a documented code) also named is that
    entry's finding again: only the graph's findings on lines nothing else knows stand."""
    ours = [h for h in hits if not _is_vendor(h) and h.kind != "wrapper"]  # a wrapper names no cause
    named = {(e.file, e.line) for h in ours for e in h.evidence}
    kept = []
    for h in hits:
        if not _is_vendor(h):
            kept.append(h)
            continue
        if any((e.file, e.line) in named for e in h.evidence):
            continue
        # in the error report of one of our findings the graph says the same again, less precisely
        if any(_compatible(g.actor, h.actor) and _near(g, h) for g in ours):
            continue
        kept.append(h)
    return kept


def _is_specific(h: _Hit) -> bool:
    """An entry of ours written for one failure (not a rule by structure, an envelope, a code's meaning in the
    code book or the vendor's graph): in the error report of a documented code it says what the code meant."""
    e = h.entry
    return e.family != "code" and e.kind == "fault" and not e.general and not _is_vendor(h)


def _is_catch_all(h: _Hit) -> bool:
    return h.entry.family == "python" and h.kind == "wrapper"


def _drop_envelopes(hits: list[_Hit]) -> list[_Hit]:
    """A wrapper (a call that failed with a code, a plog ERROR line, a Python exception) is evidence of the
    specific finding of the same actor, or of the same error report when its line names none; the Python
    catch-all also gives way to any specific failure elsewhere in the logs. With nothing else to explain
    the log, it stands as the finding."""
    specific = [h for h in hits if h.kind != "wrapper"]
    claimed = {(e.file, e.line) for h in specific for e in h.evidence}
    wrappers = [h for h in hits if h.kind == "wrapper" and not _is_catch_all(h)]
    catch_all = [h for h in hits if _is_catch_all(h)]
    kept: list[_Hit] = []
    for w in sorted(wrappers, key=lambda h: h.seq):
        # no specific finding near: the first envelope of the error report holds the others' lines
        if not _distribute(w, specific, claimed) and not _distribute(w, kept, claimed):
            kept.append(w)
            claimed.update((e.file, e.line) for e in w.evidence)
    faults = [h for h in specific if h.kind == "fault"]
    for c in catch_all:
        if not _distribute(c, specific + kept, claimed) and not faults:
            kept.append(c)
    return specific + kept


def _compatible(a: Actor | None, b: Actor | None) -> bool:
    """Could be one process: the same actor, an unknown one, or two names of different kinds (the pid a
    line names may be the rank another line names) - never two different ranks or devices."""
    return a is None or b is None or a == b or a[0] != b[0]


def _owners(w: _Hit, candidates: list[_Hit]) -> list[_Hit]:
    return [h for h in candidates if (w.actor is not None and h.actor == w.actor)
            or (_compatible(w.actor, h.actor) and _near(h, w))]


def _distribute(w: _Hit, candidates: list[_Hit], claimed: set[tuple[str, int]]) -> bool:
    """Give each of w's lines that no finding shows yet to the owner whose lines are nearest (the one
    before it first); False when w has no owner."""
    owners = _owners(w, candidates)
    if not owners:
        return False
    for seq, ev, line in zip(w.order, w.evidence, w.lines, strict=True):
        if (ev.file, ev.line) in claimed:
            continue
        same_file = [h for h in owners if h.evidence and h.evidence[0].file == ev.file] or owners

        def distance(h: _Hit, line: int = line) -> tuple[int, int]:
            before = [line - x for x in h.lines if x <= line]
            return (min(before), 0) if before else (min(abs(x - line) for x in h.lines), 1)

        host = min(same_file, key=lambda h: (distance(h)[1], distance(h)[0]))
        host.add(ev, seq)
        claimed.add((ev.file, ev.line))
    return True


# ---------------------------------------------------------------- the first failure


def _before(a: _Hit, b: _Hit) -> int:
    """Across files: by the timestamps when both lines carry one, else by layer. In one file: log order,
    except in one error report of one process (lines close together), where the lower layer came first."""
    if a.file_idx != b.file_idx:
        by_time = _ts_cmp(a.ts, b.ts)
        if by_time:
            return by_time
        by_layer = LAYER_ORDER[a.layer] - LAYER_ORDER[b.layer]
        if by_layer:
            return by_layer
    elif _is_vendor(a) != _is_vendor(b) and _near(a, b):
        return 1 if _is_vendor(a) else -1  # in one error report our specific finding comes before the graph's
    elif a.actor == b.actor and _near(a, b):
        by_layer = LAYER_ORDER[a.layer] - LAYER_ORDER[b.layer]
        if by_layer:
            return by_layer
    return -1 if a.seq < b.seq else (1 if a.seq > b.seq else 0)


def _label(hit: _Hit) -> str:
    return f"{hit.code} on {_actor_text(hit)}" if _actor_text(hit) else hit.code


def _actor_text(hit: _Hit) -> str | None:
    if hit.actor is None:
        return hit.node
    kind, value = hit.actor
    if kind == "node":
        return str(value)
    where = f" on {hit.node}" if hit.node else ""
    return f"{kind} {value}{where}"


def _is_acl_number(h: _Hit) -> bool:
    """A numeric ACL/runtime return code the catalog named (no signature entry of its own): what a call
    returned, reported again by the CANN error message (E?xxxx) printed under it."""
    return h.entry.family == "code" and h.code.isdigit()


def _explainer(h: _Hit, hits: list[_Hit]) -> _Hit | None:
    """The finding this one reports again (entry.explained_by), the same actor's first. A bare ACL return
    code is explained by a CANN error code (E?xxxx, more specific) in the same error report."""
    if _is_vendor(h):  # the graph's rules: an entity another found entity leads to is its consequence
        causes = load_vendor_graph().causes_of(h.code)
        found = [g for g in hits if g is not h and g.code in causes]
        if found:
            return found[0]
    if _is_acl_number(h):
        cann = [g for g in hits if g is not h and g.code[:1] == "E" and g.kind != "wrapper"
                and _compatible(g.actor, h.actor) and _near(g, h)]
        if cann:
            return cann[0]
    if h.entry.family == "code":  # the code book's meaning of a code, said again by an entry in its report
        named = [g for g in hits
                 if g is not h and _is_specific(g) and _compatible(g.actor, h.actor) and _near(g, h)]
        if named:
            return named[0]
    if not h.entry.explained_by:
        return None
    found = [g for g in hits if g is not h and g.entry.id in h.entry.explained_by]
    if not found:
        return None
    same = [g for g in found if g.actor == h.actor or g.actor is None or h.actor is None]
    return (same or found)[0]


def _with_roles(hits: list[_Hit]) -> list[Finding]:
    """The first failure is the cause. A finding that reports a more specific one again (explained_by) is
    its consequence, whatever the order; so is a remote-kind finding (a timeout waiting on a peer) after
    a failure, or on another actor than the first failure. With only timeouts, the first one is the cause."""
    cause_of: dict[int, _Hit] = {}  # id(hit) -> the root it follows
    explained: set[int] = set()  # consequences by explained_by: listed after their cause, whatever the order
    for h in hits:
        seen = {id(h)}
        g = _explainer(h, hits)
        while g is not None and id(g) not in seen:  # the root of a chain: what the chain started from
            seen.add(id(g))
            cause_of[id(h)] = g
            explained.add(id(h))
            g = _explainer(g, hits)
    first_fault = next((h for h in hits if h.kind != "remote" and id(h) not in cause_of), None)
    first_remote = next((h for h in hits if h.kind == "remote" and id(h) not in cause_of), None)
    for i, h in enumerate(hits):
        if id(h) in cause_of or h.kind != "remote":
            continue
        earlier = next((g for g in hits[:i] if g.kind != "remote" and id(g) not in cause_of), None)
        if earlier is not None:
            cause_of[id(h)] = earlier
        elif first_fault is not None and first_fault.actor != h.actor:
            cause_of[id(h)] = first_fault  # order unknown (no timestamps across files): it is the failure
        elif first_fault is None and h is not first_remote and first_remote is not None:
            cause_of[id(h)] = first_remote
    # a consequence is listed after what it follows
    ordered: list[_Hit] = []
    placed: set[int] = set()
    followers: dict[int, list[_Hit]] = {}
    for g in hits:
        if id(g) in explained:
            followers.setdefault(id(cause_of[id(g)]), []).append(g)
    for h in hits:
        if id(h) in placed or (id(h) in explained and id(cause_of[id(h)]) not in placed):
            continue  # placed right after its cause
        for g in (h, *followers.get(id(h), ())):
            if id(g) not in placed:
                ordered.append(g)
                placed.add(id(g))
    ordered += [h for h in hits if id(h) not in placed]
    out = []
    for h in ordered:
        cause = cause_of.get(id(h))
        e = h.entry
        out.append(
            Finding(
                id=e.id,
                code=h.code,
                title=h.title,
                causes=list(e.causes),
                fix=e.fix,
                check_ids=list(e.check_ids),
                evidence=h.evidence,
                matches=h.matches,
                role="consequence" if cause else "cause",
                caused_by=_label(cause) if cause else None,
                rank=h.actor[1] if h.actor and h.actor[0] == "rank" else None,
                actor=_actor_text(h),
                first_seen=h.ts_text,
                family=e.family,
                kind=h.kind,
                sources=list(e.sources),
                layer=h.layer,
                node=h.node or (str(h.actor[1]) if h.actor and h.actor[0] == "node" else None),
            )
        )
    return out
