"""The FastAPI application: routes, access control, problem details, metrics and the OpenAPI document."""

from __future__ import annotations

import json
from typing import Annotated, Any

import sqlalchemy.exc
from fastapi import Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from sqlalchemy import Connection, Engine

from api import audit, por, proofs, submissions, tiles
from api.access import BearerTokenMiddleware, QueryEncodingMiddleware
from api.db import DatabaseUnavailable, db_connection
from api.metrics import ApiMetrics, MetricsMiddleware
from api.models import Health
from api.problems import PROBLEM_MEDIA_TYPE, install_problem_handlers, problem_response, problem_responses
from engine.version import ENGINE_VERSION
from ledger.translog.checkpoints import latest_checkpoint
from ledger.translog.tree import tree_size

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

DEFAULT_MAX_BODY_BYTES = 1_048_576


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    # a database that does not answer is the server's state, not the request's: 503, retry later
    return problem_response(503, "database_unavailable", "the ledger database is not answering; retry later")


def _problem_media_types(document: dict[str, Any]) -> None:
    """Error responses are documented as application/problem+json (FastAPI writes application/json)."""
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status[0] in "45" and "application/json" in content:
                    schema = content.pop("application/json")
                    content[PROBLEM_MEDIA_TYPE] = schema


def _hoist_defs(document: dict[str, Any]) -> None:
    """Move ``$defs`` of inline JSON Schemas (the envelope's) into components, fixing their refs."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$defs" in node:
                for name, schema in node.pop("$defs").items():
                    schemas.setdefault(name, walk(schema))
            for key in ("$schema", "$id"):
                node.pop(key, None)
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, str) and node.startswith("#/$defs/"):
            return "#/components/schemas/" + node.removeprefix("#/$defs/")
        return node

    document["paths"] = walk(document["paths"])
    document["components"]["schemas"] = {name: walk(schema) for name, schema in schemas.items()}


def create_app(
    engine: Engine, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> FastAPI:
    """The API on a read-only ``engine`` (see :func:`api.db.reader_engine`)."""
    app = FastAPI(
        title="Cournot verification ledger",
        version=ENGINE_VERSION,
        description="Read-only API over the ledger, and its transparency log as C2SP tlog-tiles.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.max_body_bytes = max_body_bytes
    metrics = ApiMetrics()
    install_problem_handlers(app)
    app.add_exception_handler(DatabaseUnavailable, _unavailable)
    app.add_exception_handler(sqlalchemy.exc.OperationalError, _unavailable)
    app.add_exception_handler(sqlalchemy.exc.TimeoutError, _unavailable)
    for module in (submissions, proofs, audit, por, tiles):
        app.include_router(module.router)

    @app.get("/healthz", response_model=Health, responses=problem_responses(503), tags=["operations"])
    def healthz(db: Annotated[Connection, Depends(db_connection)]) -> Health:
        """The database answers; the tree size and the latest checkpoint's size."""
        checkpoint = latest_checkpoint(db)
        return Health(
            status="ok", tree_size=tree_size(db), checkpoint_size=checkpoint.tree_size if checkpoint else None
        )

    app.add_api_route(
        "/metrics",
        metrics.render,
        methods=["GET"],
        tags=["operations"],
        responses={
            200: {
                "content": {"text/plain": {"schema": {"type": "string"}}},
                "description": "Prometheus text",
            },
            **problem_responses(401),
        },
    )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            _problem_media_types(document)
            _hoist_defs(document)
            if token is not None:
                document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
                document["security"] = [{"bearer": []}]
            app.openapi_schema = json.loads(json.dumps(document))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(QueryEncodingMiddleware)
    if token is not None:
        app.add_middleware(BearerTokenMiddleware, token=token)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
