"""A run's parts, assembled in one place: the model clients (one per model and endpoint, a role's own as
`--model-role` gives it: agents.models.model_client), the scorer (and the loads it warms), the solver, the
instance pool, and the embedded models it starts (and so stops).

Its users: the headless run (`runs.benchmark_run.BenchmarkRun`, which holds one), the pytest fixtures
(`plugin.fixtures`: each process that runs tests reads its run's), `run`'s warm-up before pytest starts (whose
scorer the session is handed), and `optimize` (its final runs and its train/validation rollouts: `sharing_with`
gives another prompts folder or selection the same clients, scorer and embedded models). Each part is built on
first use, once.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from apibank_bench.runs.instances import InstancePool, instances_in_flight

if TYPE_CHECKING:
    from apibank_bench.agents import Solver
    from apibank_bench.agents.team_models import TeamModels
    from apibank_bench.core.settings import RunConfig
    from apibank_bench.data.tasks import Task
    from apibank_bench.scoring.scorer import Scorer

_UNBUILT: Any = object()


class RunParts:
    """What solves and scores a run's instances, each part built once from the run's settings."""

    def __init__(self, cfg: "RunConfig", *, instance_ids: Callable[[], list[str]] = list,
                 announce: Callable[[str], None] = lambda title: None, handed_urls: dict[str, str] | None = None,
                 sharing: int = 1, models: Any = _UNBUILT, scorer: "Scorer | None" = None) -> None:
        self.cfg = cfg
        self._instance_ids = instance_ids  #: the run's instances: a researcher's GGUF gets a context sized from them
        self._announce = announce  #: says that an embedded model starts (it can take a while)
        self._handed = handed_urls  #: an xdist worker's: the controller's embedded models' URLs, by file hash
        self._sharing = sharing  #: the processes sending to the endpoints at once (xdist workers)
        self._owner: RunParts | None = None  #: the parts whose clients, scorer and embedded models these share
        self._servers: Any = None  #: the embedded models started here (llm.embedded_launcher.OnDemandServer)
        self._local_url: str | None = None
        self._models: Any = models  #: given (a test's stand-in), else built on first use
        self._scorer: Scorer | None = scorer
        self._solver: Solver | None = None
        self._warming: Any = None  #: the scorer's loads under way (scoring.scorer.Preload)

    def sharing_with(self, cfg: "RunConfig") -> "RunParts":
        """Parts for other settings that these clients serve (another prompts folder, another selection): the
        clients, the scorer and the embedded models shared, a solver of their own."""
        owner = self._owner or self
        other = RunParts(cfg)
        other._owner = owner
        return other

    # -- the embedded models -------------------------------------------------------------------

    def url(self, model: str | None = None) -> str:
        """The URL of an embedded model's server (`model`: a `--model` value, default the run's own): on an xdist
        worker the controller's (by the file's hash: one server per file), else started here on first use."""
        if self._owner is not None:
            return self._owner.url(model)
        if self._handed:
            from apibank_bench.llm.embedded_models import embedded_choice

            return self._handed[embedded_choice(self.cfg, model).sha256]
        if self._servers is None:
            from apibank_bench.agents.models import embedded_servers

            self._servers = embedded_servers(self.cfg, self._instance_ids, self._announce)
        url = self._servers.url(model)
        self._local_url = self._servers.started_url  # kept once the server stopped: the summary names it
        return url

    @property
    def local_url(self) -> str | None:
        """Where the run's embedded model answered, if these parts started it (summary.json's provenance)."""
        if self._owner is not None:
            return self._owner.local_url
        return self._local_url

    def embedded_urls(self) -> dict[str, str]:
        """Every embedded model the run asks (its own, its roles'), started: their URLs by file hash (what the
        xdist controller hands its workers)."""
        from apibank_bench.agents.model_roles import assignments, is_embedded_role
        from apibank_bench.llm.embedded_models import embedded_choice

        cfg = self.cfg
        wanted = ([cfg.model or ""] if not cfg.base_url else []) + [
            given.model for given in assignments(cfg) if is_embedded_role(given)]
        return {embedded_choice(cfg, model).sha256: self.url(model) for model in wanted}

    def close(self, timeout: float = 10.0) -> None:
        """Stop what these parts started: the scorer's loads (what has started is finished, nothing more starts) and
        the embedded models (SIGKILL after `timeout` seconds); shared ones are their owner's to stop."""
        if self._warming is not None:
            self._warming.stop()
        if self._servers is not None:
            self._servers.stop(timeout)

    # -- the parts -------------------------------------------------------------------------------

    def models(self) -> "TeamModels | None":
        """The run's chat clients, one per model and endpoint (None for the gold self-check); the embedded model
        starts if the run asks it. An unknown `--model-role` role is a ValueError, a dead endpoint
        llm.probe.EndpointUnreachable."""
        if self._owner is not None:
            return self._owner.models()
        if self._models is _UNBUILT:
            from apibank_bench.agents.models import model_client

            self._models = model_client(self.cfg, self.url, self._sharing)
        return self._models

    @property
    def built_models(self) -> "TeamModels | None":
        """The chat clients if they were built (this process's: none in the xdist controller), else None."""
        owner = self._owner or self
        return None if owner._models is _UNBUILT else owner._models

    def scorer(self) -> "Scorer":
        if self._owner is not None:
            return self._owner.scorer()
        if self._scorer is None:
            from apibank_bench.core.paths import require_root
            from apibank_bench.scoring.scorer import Scorer

            self._scorer = Scorer(require_root(self.cfg.root), self.cfg.toolsearcher_scorer)
        return self._scorer

    def warm_scoring(self) -> None:
        """Start loading, in the background, what scoring the run's instances may need (scoring.api_scorers.slow_loads:
        the embedding model and the catalogs a ToolSearcher scorer searches), for the scorer these parts score with;
        their instances are read in that thread too. `close` stops it."""
        from apibank_bench.data.tasks import get_task
        from apibank_bench.scoring.api_scorers import slow_loads
        from apibank_bench.scoring.scorer import Preload

        scorer = self.scorer()

        def load() -> None:
            tasks = [get_task(task_id, root=scorer.root) for task_id in dict.fromkeys(self._instance_ids())]
            for each in slow_loads(tasks, scorer):
                each()

        self._warming = Preload([load]).start()

    def solver(self) -> "Solver":
        """The run's topology over its clients, built once."""
        if self._solver is None:
            from apibank_bench.agents import build_solver

            self._solver = build_solver(self.cfg, self.models())
        return self._solver

    def pool(self, load: Callable[[str], "Task"] | None = None, concurrency: int | None = None,
             time_limit: float | None = None) -> InstancePool:
        """An instance pool over these parts, not started: `concurrency` in flight (default the run's
        `instances_in_flight`); `load` finds a case's task (default: in the run's data)."""
        from apibank_bench.agents.team_models import TeamModels
        from apibank_bench.data.tasks import get_task

        scorer, solver, models = self.scorer(), self.solver(), self.built_models
        if concurrency is None:
            batches = models is not None and TeamModels.of(models).batches  # a wide server: a wide pool
            concurrency = instances_in_flight(self.cfg, batches)
        return InstancePool(load or (lambda task_id: get_task(task_id, root=scorer.root)), solver, scorer,
                            concurrency=concurrency, time_limit=time_limit)

    def solve_tasks(self, tasks: "list[Task]", concurrency: int,
                    on_done: Callable[[Any], None] | None = None) -> list[Any]:
        """Solve and score tasks, `concurrency` in flight; the results (runs.instances.InstanceResult) in the order
        of `tasks`, each seen by `on_done` in that order on this thread (optimize's rollouts: no folder)."""
        by_id = {task.combined_id: task for task in tasks}
        pool = self.pool(by_id.__getitem__, min(concurrency, len(tasks)) or 1)
        pool.start(by_id)
        try:
            results = []
            for task_id in by_id:
                results.append(pool.result(task_id))
                if on_done is not None:
                    on_done(results[-1])
            return results
        finally:
            pool.close()


def with_prompts(parts: RunParts, prompts_dir: str) -> RunParts:
    """`parts` for the same run with another prompts folder (an optimizer's candidate)."""
    return parts.sharing_with(dataclasses.replace(parts.cfg, prompts_dir=prompts_dir))
