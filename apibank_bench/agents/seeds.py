"""Every agent's sampling seed, from one function (an epoch's offset moves its base).

The reference harness seeds each request with its place in the instance's order of
requests: the single agent 0; independent solvers, sequential stages and team-size
replicas 0..N-1; centralized workers 0..N-2 and the manager N-1; a debate round by
round, `round x N + peer`. Our topologies give each agent that place as its `index`
(and the debate its `round`), so the seed is the run's base seed plus that number.
"""

from __future__ import annotations


def agent_seed(base: int, round: int, index: int, team_size: int, by_round: bool) -> int:
    """The seed of agent `index` in `round` of a team of `team_size` (base seed `base`); `by_round`: the
    topology's rounds are the whole team answering again (its spec's `seeds_by_round`)."""
    return base + (round * team_size if by_round else 0) + index
