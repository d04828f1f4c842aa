"""Text-prompted part selection (ATOP's input, e.g. "open the left door").

The part is picked from part names / semantic labels (nouns) and spatial words; the motion type from the verb
and the noun. Spatial convention (kinemesh frame, Z up): the object's **front faces -Y** (PartNet-Mobility
after our Y-up -> Z-up conversion, (x, y, z)_file -> (x, -z, y): its drawers slide along -Y and its doors sit at
the -Y face; our synthetic objects follow the same convention). "left"/"right" are as seen by a viewer standing
in front of the object looking at it (towards +Y): left = -X, right = +X; "top"/"upper" = +Z,
"bottom"/"lower" = -Z; "front" = -Y, "back"/"rear" = +Y; "middle"/"center" = the median part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from kinemesh.errors import KinemeshError

# noun -> the part kinds it can name (part names / labels are split into tokens and compared with these)
SYNONYMS = {
    "door": {"door", "rotation_door", "slider_door", "hatch"},
    "drawer": {"drawer"},
    "lid": {"lid", "cover", "rotation_lid", "cap", "top"},
    "cover": {"lid", "cover"},
    "cap": {"lid", "cap", "rotation_lid"},
    "screen": {"screen", "lid", "display"},
    "display": {"screen", "display"},
    "knob": {"knob", "dial", "button"},
    "dial": {"knob", "dial"},
    "button": {"button", "knob"},
    "handle": {"handle"},
    "window": {"sash", "window"},
    "sash": {"sash"},
    "arm": {"arm"},
    "head": {"head"},
    "spout": {"spout"},
    "blade": {"blade", "jaw"},
    "jaw": {"jaw", "blade"},
    "flap": {"flap"},
    "lever": {"lever"},
    "wheel": {"wheel"},
    "leg": {"leg"},
    "seat": {"seat"},
    "piston": {"piston", "slider"},
    "slider": {"slider", "piston"},
}
SPATIAL = {  # word -> (world axis, direction)
    "left": (0, -1), "right": (0, 1),
    "front": (1, -1), "back": (1, 1), "rear": (1, 1),
    "top": (2, 1), "upper": (2, 1), "bottom": (2, -1), "lower": (2, -1),
}
MIDDLE = {"middle", "center", "centre", "central"}
PRISMATIC_VERBS = {"slide", "pull", "push", "extend", "retract", "translate", "draw"}
REVOLUTE_VERBS = {"rotate", "turn", "twist", "swing", "flip", "spin", "fold", "tilt", "raise", "lift", "hinge"}
PRISMATIC_NOUNS = {"drawer", "sash", "window", "slider", "piston"}
REVOLUTE_NOUNS = {"door", "lid", "cover", "cap", "screen", "display", "knob", "dial", "flap", "lever", "arm",
                  "head", "spout", "blade", "jaw", "wheel"}


@dataclass
class PromptTarget:
    """The part a prompt names and the motion type it implies (None: not implied)."""

    part: str
    motion_type: str | None
    noun: str
    spatial: list[str] = field(default_factory=list)


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z]+", text.lower()) if t]


def _kind_tokens(name: str, label: str) -> set[str]:
    toks = set(_tokens(name)) | set(_tokens(label))
    if label:
        toks.add(label.lower())
    return toks


def resolve_prompt(prompt: str, parts: list[tuple[str, str, np.ndarray]],
                   exclude: set[str] | None = None) -> PromptTarget:
    """Pick the part ``prompt`` refers to among ``parts`` [(name, label, vertices (n, 3))].

    ``exclude``: parts that cannot be meant (e.g. the root body). Raises KinemeshError when the prompt names
    no existing part or stays ambiguous (the message lists the candidates and their positions).
    """
    words = _tokens(prompt)
    if not words:
        raise KinemeshError("empty --prompt; say which part moves, e.g. \"open the left door\"")
    exclude = exclude or set()
    avail = [(n, lab, v) for n, lab, v in parts if n not in exclude and len(v)]
    listing = ", ".join(f"{n} ({lab})" if lab else n for n, lab, _ in avail)
    nouns = [w for w in words if w in SYNONYMS] + [w[:-1] for w in words if w.endswith("s") and w[:-1] in SYNONYMS]
    # a part named literally in the prompt ("open door_left") wins
    literal = [p for p in avail if p[0].lower() not in SYNONYMS
               and re.search(r"(?<![a-z0-9_])" + re.escape(p[0].lower()) + r"(?![a-z0-9_])", prompt.lower())]
    if len(literal) == 1:
        n, lab, _ = literal[0]
        return PromptTarget(n, _motion_type(words, _tokens(n) + _tokens(lab)), n)
    matched, noun = [], None
    for w in nouns:
        kinds = SYNONYMS[w]
        m = [p for p in avail if _kind_tokens(p[0], p[1]) & kinds]
        # a door's handle carries "door" in its name: prefer parts whose kind has no extra part noun
        plain = [p for p in m if not ((_kind_tokens(p[0], p[1]) - kinds) & set(SYNONYMS))]
        m = plain or m
        if m:
            matched, noun = m, w
            break
    if not matched:
        raise KinemeshError(f"prompt {prompt!r} names no part of this object; parts: {listing}")
    spatial = [w for w in words if w in SPATIAL or w in MIDDLE]
    cands = matched
    if spatial and len(cands) > 1:
        # names that carry the spatial word (door_left) first, then geometry
        named = [p for p in cands if all(w in _tokens(p[0]) for w in spatial)]
        if len(named) == 1:
            cands = named
        else:
            cands = _spatial_pick(cands, spatial, np.concatenate([v for _, _, v in avail]))
    if len(cands) > 1:
        desc = ", ".join(f"{n} ({_where(v, np.concatenate([vv for _, _, vv in avail]))})" for n, _, v in cands)
        raise KinemeshError(f"prompt {prompt!r} is ambiguous: {len(cands)} parts match '{noun}': {desc}; add "
                            "left/right/top/bottom/front/back or name the part")
    n, lab, _ = cands[0]
    return PromptTarget(n, _motion_type(words, [noun]), noun, spatial)


def _spatial_pick(cands, spatial, all_v):
    size = float(np.max(np.ptp(all_v, axis=0))) or 1.0
    centres = np.array([0.5 * (v.min(0) + v.max(0)) for _, _, v in cands])
    score = np.zeros(len(cands))
    for w in spatial:
        if w in SPATIAL:
            ax, sgn = SPATIAL[w]
            score += sgn * centres[:, ax] / size
        else:  # middle: closest to the median along the axis of largest spread
            ax = int(np.argmax(np.ptp(centres, axis=0)))
            score -= np.abs(centres[:, ax] - np.median(centres[:, ax])) / size
    best = score.max()
    keep = [c for c, s in zip(cands, score) if s >= best - 0.02]
    return keep


def _where(v, all_v) -> str:
    lo, hi = all_v.min(0), all_v.max(0)
    c = (0.5 * (v.min(0) + v.max(0)) - 0.5 * (lo + hi)) / np.maximum(hi - lo, 1e-9)
    words = []
    if abs(c[2]) > 0.1:
        words.append("top" if c[2] > 0 else "bottom")
    if abs(c[0]) > 0.1:
        words.append("right" if c[0] > 0 else "left")
    if abs(c[1]) > 0.1:
        words.append("back" if c[1] > 0 else "front")
    return " ".join(words) or "centre"


def _motion_type(words: list[str], nouns: list[str]) -> str | None:
    ws = set(words)
    if ws & PRISMATIC_VERBS:
        return "prismatic"
    if ws & REVOLUTE_VERBS:
        return "revolute"
    ns = set(nouns)
    if ns & PRISMATIC_NOUNS:
        return "prismatic"
    if ns & REVOLUTE_NOUNS:
        return "revolute"
    return None
