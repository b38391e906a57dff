"""Commit statuses (and their combined state) and check runs."""

from __future__ import annotations

from typing import Any

from squadron.local.sandbox.base import ApiError, Json, github_now
from squadron.local.sandbox.webhooks import WebhookOps


class CheckOps(WebhookOps):
    def _op_repos__create_commit_status(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        now = github_now()
        status: Json = {
            "id": next(self._ids),
            "state": body["state"],
            "context": body.get("context") or "default",
            "description": body.get("description"),
            "target_url": body.get("target_url"),
            "creator": self.user(caller),
            "created_at": now,
            "updated_at": now,
        }
        repo.statuses.setdefault(params["sha"], []).insert(0, status)
        branches = [
            {"name": n, "commit": {"sha": s}} for n, s in repo.store.branches().items() if s == params["sha"]
        ]
        self.emit(
            repo,
            "status",
            None,
            {**status, "sha": params["sha"], "branches": branches, "commit": {"sha": params["sha"]}},
            caller,
        )
        self._checks_changed(repo, params["sha"])
        return 201, status

    def _op_repos__get_combined_status_for_ref(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(params["ref"]) or params["ref"]
        latest: dict[str, Json] = {}
        for status in repo.statuses.get(sha, []):
            latest.setdefault(status["context"], status)
        states = {s["state"] for s in latest.values()}
        combined = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if "pending" in states or not states
            else "success"
        )
        return 200, {
            "state": combined,
            "sha": sha,
            "total_count": len(latest),
            "statuses": list(latest.values()),
        }

    def _op_checks__create(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        run: Json = {
            "id": next(self._ids),
            "name": body["name"],
            "head_sha": body["head_sha"],
            "status": body.get("status", "queued"),
            "conclusion": body.get("conclusion"),
            "started_at": github_now(),
            "completed_at": github_now() if body.get("conclusion") else None,
            "app": self._app(),
            "check_suite": {
                "id": next(self._ids),
                "head_sha": body["head_sha"],
                # A merge group's checks run on its gh-readonly-queue/... branch.
                "head_branch": next(
                    (n for n, s in sorted(repo.store.branches().items()) if s == body["head_sha"]), None
                ),
            },
            "pull_requests": [
                {"number": n} for n, p in repo.pulls.items() if p["head"]["sha"] == body["head_sha"]
            ],
        }
        repo.check_runs.setdefault(body["head_sha"], []).append(run)
        if run["conclusion"]:
            run["status"] = "completed"
            self.emit(repo, "check_run", "completed", {"check_run": run}, caller)
            self._checks_changed(repo, body["head_sha"])
        return 201, run

    def _op_checks__update(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        run = next(
            (r for runs in repo.check_runs.values() for r in runs if r["id"] == int(params["check_run_id"])),
            None,
        )
        if run is None:
            raise ApiError(404, "Not Found")
        run.update({k: body[k] for k in ("status", "conclusion") if k in body})
        if run.get("conclusion"):
            run.update({"status": "completed", "completed_at": github_now()})
            self.emit(repo, "check_run", "completed", {"check_run": run}, caller)
            self._checks_changed(repo, run["head_sha"])
        return 200, run

    def _op_checks__list_for_ref(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(params["ref"]) or params["ref"]
        runs = repo.check_runs.get(sha, [])
        return 200, {"total_count": len(runs), "check_runs": runs}
