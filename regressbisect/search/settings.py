"""How hard the commit search tries, and what counts as a culprit: `SearchSettings`, the knobs every
search of a hunt reads (config.py's knobs name its fields, and take their defaults there)."""
from __future__ import annotations

from dataclasses import dataclass

from regressbisect.config import DIRECTION, DIRECTIONS, MAX_SAMPLES, MIN_EFFECT, STALL_SHARE, Direction, HuntConfig
from regressbisect.search.naming import alpha_share, fresh_pairs_to_tell_a_mode

__all__ = ["SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """How hard the search tries, and what counts as a culprit."""

    min_effect: float = MIN_EFFECT
    """Smallest relative tok/s step that counts (0.02 = 2%). Below about 2% run-to-run noise of a
    training job (clocks, data order, allocator) makes localisation cost many samples, and most
    teams do not act on it; pass 0.01 to hunt smaller steps at higher cost."""
    direction: Direction = DIRECTION
    """'slower' hunts drops in tok/s, 'faster' rises, 'both' either; a step the other way is not a culprit."""
    alpha: float = 0.05
    """Level of the control-arm looks (one-sided alpha/2 in the hunted direction; stopping a hunt
    needs the alpha/5 interval to agree) and of the side checks (alpha/5)."""
    confirm_alpha: float = 0.05
    """False-accept rate of the SPRT that confirms each step on pairs (the posterior must reach
    `confidence` as well)."""
    beta: float = 0.01
    """False-veto rate of the SPRT that confirms each step: accepting 'no step' drops that pair
    for good, so it is kept much smaller than confirm_alpha."""
    confidence: float = 0.99
    """Posterior mass a (last_good, first_bad) step must reach before it is reported."""
    confirm_enter: float = 0.5
    """Posterior mass at which the two commits of the leading step start being measured in pairs."""
    max_samples: int = MAX_SAMPLES
    """Cap of samples per candidate, and of GOOD/BAD pairs in the control arm (the two caps are
    separate: GOOD and BAD may reach twice this): bounds the cost of an undecidable case. Above its
    default it raises each interval's budget in proportion (`SearchContext.over_budget`), so that
    raising it lets an undecided hunt, re-run on its stored samples, go further."""
    max_probes: int = 2000
    """Cap of benchmark executions for the whole search; reached, the search reports what it has."""
    drift_prior: float = 0.05
    """Prior probability (0 <= p < 1) that the machine's speed drifts during the hunt. The
    change-point posterior averages a model without drift and one with a linear drift in time, each
    weighted by how well it explains the samples (Bayesian model averaging). With a drift term always
    in (a flat-prior version), a commit sampled in a burst was confounded with the drift and 3%/2%
    hunts cost 50% more; at 0, a machine that slows 0.1% per round makes the posterior propose steps
    that the paired test refutes, and a fifth of such hunts end with nothing
    (docs/experiments/drift_model.md)."""
    pair_window: int = 2
    """Samples of two candidates at most this many rounds apart form a pair (drift cancels in it)."""
    side_drop: float = 0.1
    """A side of a culprit is dropped once a step of the side margin between its ends has less than this probability."""
    side_share: float = 0.2
    """Side margin: a side is cleared once a further step of max(min_effect, side_share * the
    GOOD->BAD gap) is implausible there. Ruling out a step of min_effect itself costs about
    2 (1.28 sigma / min_effect)^2 samples per end (80 at 10% noise and 2%): beyond the point where a
    missed step would own a fifth of the gap, the unexplained remainder in the report carries it."""
    side_pairs: int | None = None
    """None: a side's margin is sized by the gap (side_share) alone. A number: the margin is also at
    least the step that many fresh pairs rule out at the hunt's pooled noise (t sigma sqrt(2 /
    side_pairs)), so on a noisy machine a flat side is cleared in about that many pairs instead of
    the (sigma / margin)^2 a fifth of the gap needs (70 per side at 14% noise), and a smaller
    further step is left to what runs after the sides. The hunk hunt sets it for its prefix
    searches (search/hunks/prefix.py), where the search of the rest against BASE catches such a step;
    the commit hunt does not: with the machine's speed switching at 15% noise, 5 of 100 two-step
    hunts cleared the side that held the second step (scripts/sim_sides.py; none with None)."""
    side_resolution: float | None = None
    """None: a side check that has cost as many probes as the search before it (its price) and
    still neither found nor ruled out the side margin stops at the resolution its pairs reached
    (the smallest further step they rule out, reported: `SideCheck.priced`). A number: the side
    margin is at least this step and is ruled out however long it takes. Ruling out a small step
    costs (sigma / step)^2 pairs: on a real history at 10-15% noise the side checks were 221 of
    388 probes."""
    side_null: float = 0.8
    """Searching a side stops when the posterior of 'no step on this side' reaches this."""
    max_vetoes: int = 4
    """Steps refuted by the paired test before an interval is given up as unresolved."""
    reproduce_alpha: float = 0.005
    """Two-sided level of each control-arm look that declares the regression reproduced (and of
    the final check of a hunt that named no culprit). The looks are repeated (up to six), so each
    is held at a tenth of alpha: an A/A range is then called reproduced in well under 1% of hunts
    at any noise (scripts/bench_accuracy.py), where alpha per look let about 6% through."""
    name_alpha: float = 0.001
    """Family-wise rate of naming a commit that is no step, over every step the hunt confirms (every
    bracket and side): the k-th distinct step that reaches confirmation gets name_alpha / (k (k + 1))
    of it (the shares add up to name_alpha), spent by an always-valid test on pairs of its two
    commits taken after it was picked (`search/naming.py`, `NamingGate.named`)."""
    read_interference: bool = True
    """Read runs far off their commit's level as interfered and set them apart from every test
    (search/interference.py; a control arm then answers from three pairs on). Runs on a shared
    machine are not lognormal: a quarter of them 30% slow made the Gaussian tests miss a 10% step
    or pay 10x (scripts/bench_accuracy.py --interference)."""
    stall_share: float = STALL_SHARE
    """The share of runs a mode may hold at any commit before the hunt has seen it (a commit that
    stalls a third of its runs: a recompile, a GC pause, a data loader waiting, a slowdown of the
    mean whose first runs may all be quick or all slow). 'Not reproduced', at the arm's stop or its
    cap, waits until the arm's pairs rule out a slow mode in that share of BAD's runs beyond
    GOOD's at the stop's level (`ControlArm._no_stall_left`, `stats.stall_log_e`: 15 pairs with no
    run off at 0.3; on 4-6 quick pairs at 1-2% noise the arm ruled a 15% slowdown out in 5-24
    hunts of 100). A step is named on at least
    ln(alpha_k) / ln(stall_share (1 - stall_share)) fresh pairs, 5 for the first
    (`naming.fresh_pairs_to_tell_a_mode`; two commits of one stalled shape, one's runs all quick
    and the next's all stalled, were named a -30% step on three). 0: neither."""
    share_limit: float = 1.25
    """A culprit that surely owns more than this share of the GOOD->BAD gap (the end of its interval
    nearest zero does), or culprits that surely leave a remainder below -100% of it, mean the step
    model does not fit the samples: no culprit is named and the hunt is undecided."""

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        object.__setattr__(self, "direction", Direction(self.direction))
        if not 0 < self.min_effect < 1:
            raise ValueError("min_effect must be in (0, 1)")
        if not all(0 < x < 0.5 for x in (self.alpha, self.beta, self.confirm_alpha, self.name_alpha)):
            raise ValueError("alpha and beta must be in (0, 0.5)")
        if not 0.5 <= self.confidence < 1 or not 0 < self.confirm_enter <= self.confidence:
            raise ValueError("need 0 < confirm_enter <= confidence < 1 and confidence >= 0.5")
        if self.max_samples < 2:
            raise ValueError("need max_samples >= 2")
        if not 0 <= self.drift_prior < 1:
            raise ValueError("drift_prior must be in [0, 1)")
        if not 0 < self.reproduce_alpha <= self.alpha:
            raise ValueError("need 0 < reproduce_alpha <= alpha")
        if self.max_probes < 2:
            raise ValueError("max_probes must be >= 2")
        if not 0 <= self.side_share < 1 or not 0 < self.side_drop < 0.5 or (self.side_pairs or 1) < 1:
            raise ValueError("need 0 <= side_share < 1, 0 < side_drop < 0.5 and side_pairs >= 1 or None")
        if not 0 <= self.stall_share < 1:
            raise ValueError("stall_share must be in [0, 1)")
        if self.side_resolution is not None and not 0 < self.side_resolution < 1:
            raise ValueError("side_resolution must be in (0, 1) or None")

    def pairs_to_name_a_step(self) -> int:
        """Samples a candidate typically needs before the first step can be named: the fresh pairs
        of `naming.fresh_pairs_to_tell_a_mode` plus the two runs each of its commits had when the
        step reached confirmation (a clean 50% step capped at 6 samples stopped one pair short)."""
        floor = fresh_pairs_to_tell_a_mode(alpha_share(self.name_alpha, 1), self.stall_share)
        return floor + 2 if floor else 0

    @classmethod
    def of(cls, config: HuntConfig, command: str) -> SearchSettings:
        """The settings of `command`'s hunt: each field a knob names (config.py `knob(search=...)`)
        from the config, the rest at their defaults."""
        return cls(**config.search_values(command))
