"""The model service of a run: what it says it serves, checked against protocol and checkpoint."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from urllib3.exceptions import HTTPError

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.errors import ServiceError
from skilleval.protocol.sections import ModelServer
from skilleval.serving.answerer import Answerer, answerer_of, refuse_change, template_digest
from skilleval.serving.engines import Engine, Identified, engine_of, identify
from skilleval.serving.engines.sglang import check_identity
from skilleval.serving.http import JsonClient, Reply
from skilleval.serving.outage import ServerCalls, StatusFailure, raise_if_retryable

log = logging.getLogger(__name__)


def server_root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


# sglang's identity endpoints, newest first: /get_* were deprecated in 0.5 (warning per call).
IDENTITY_ENDPOINTS = {
    "current": ("/model_info", "/server_info"),
    "deprecated": ("/get_model_info", "/get_server_info"),
}
# What skilleval serve-world reports as its model's architecture (world/server.py).
SIMULATED_ARCHITECTURE = "ShopSimPolicy"
MODEL_INFO_KEYS = (
    "model_path",
    "served_model_name",
    "preferred_sampling_params",
    "weight_version",
    "tool_call_parser",
    "reasoning_parser",
    "architectures",
)
SERVER_INFO_KEYS = (
    "model_path",
    "served_model_name",
    "sampling_defaults",
    "preferred_sampling_params",
    "tp_size",
    "dp_size",
    "tool_call_parser",
    "reasoning_parser",
    "version",
    "launch_command",
)


class Unauthorized(ServiceError):
    """The server refuses the run's key: every request would be refused alike."""


# What llama.cpp's llama-server reports at /props (tools/server/server.cpp) that cannot
# change while it runs; its chat template is kept as a digest.
PROPS_KEYS = ("model_path", "build_info", "chat_template_caps", "model_alias")
BASE_URL_FIX = (
    "fix: execution.model_server.base_url must be the root of the server's OpenAI-compatible "
    "API, ending in its prefix (http://host:port/v1 for sglang, vLLM and llama.cpp)"
)


def _get_json(
    client: JsonClient, calls: ServerCalls | None, path: str, required: bool = False
) -> dict[str, Any] | None:
    """The JSON object at ``path``; None where the server has no such endpoint, unless it
    is ``required`` (a wrong base URL, named first with the URL requested). Through the
    run's retry layer when it has one: a busy server is waited out, up to the outage
    budget, never taken for an absent one."""
    url = client.base_url + path

    def get() -> Reply:
        reply = client.get(path)
        raise_if_retryable(reply)
        return reply

    try:
        response = calls.call(get) if calls is not None else get()
    except HTTPError as error:
        raise ServiceError(f"model server {url} unreachable: {error}") from error
    except StatusFailure as failure:
        raise ServiceError(f"model server {url} answered {failure}") from failure
    if response.status in (401, 403):
        raise Unauthorized(
            f"model server {url} answered HTTP {response.status}: the API key is missing or "
            f"wrong ({response.text[:200]!r})"
        )
    if response.status != 200:
        if required:
            raise ServiceError(
                f"model server answered HTTP {response.status} to GET {url} "
                f"({response.text[:120]!r}): no OpenAI-compatible API is served there; "
                + BASE_URL_FIX
            )
        return None
    try:
        body = response.json()
    except ValueError as error:
        raise ServiceError(
            f"model server answered GET {url} with HTTP 200 but no JSON "
            f"({response.text[:120]!r}); " + BASE_URL_FIX
        ) from error
    return body if isinstance(body, dict) else None


def fetch_identity(
    base_url: str,
    timeout_s: float = 10.0,
    calls: ServerCalls | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What the server says it serves: sglang's info endpoints (current, else deprecated),
    /v1/models (ids, owners and vLLM's roots), llama-server's /props and the title and
    version of its OpenAPI document; only fields that cannot change while a run lasts are
    kept. ``calls``: the run's retry layer
    for this server; ``headers``: its authorisation."""
    root = server_root(base_url)
    identity: dict[str, Any] = {"base_url": base_url, "identity_endpoints": None}
    model_info: dict[str, Any] = {}
    server_info: dict[str, Any] = {}
    client = JsonClient(root, timeout_s, connections=1, headers=headers)
    try:
        for generation, (model_path, server_path) in IDENTITY_ENDPOINTS.items():
            found = _get_json(client, calls, model_path)
            if found is not None:
                model_info = found
                server_info = _get_json(client, calls, server_path) or {}
                identity["identity_endpoints"] = f"{generation}: {model_path}, {server_path}"
                break
        api_prefix = base_url.rstrip("/").removeprefix(root)  # "/v1", as root was cut
        models = _get_json(client, calls, api_prefix + "/models", required=True) or {}
        props = _get_json(client, calls, "/props") or {}
        openapi = (_get_json(client, calls, "/openapi.json") or {}).get("info") or {}
    finally:
        client.close()
    listed = [m for m in models.get("data", []) if isinstance(m, dict) and "id" in m]
    identity["models"] = [m["id"] for m in listed]
    identity["owned_by"] = sorted({str(m["owned_by"]) for m in listed if "owned_by" in m})
    identity["roots"] = {m["id"]: m["root"] for m in listed if isinstance(m.get("root"), str)}
    identity["props"] = {k: props[k] for k in PROPS_KEYS if k in props}
    if isinstance(props.get("chat_template"), str):
        identity["props"]["chat_template_digest"] = template_digest(props["chat_template"])
    identity["openapi"] = {k: openapi[k] for k in ("title", "version") if k in openapi}
    identity["model_info"] = {k: model_info[k] for k in MODEL_INFO_KEYS if k in model_info}
    identity["server"] = {k: server_info[k] for k in SERVER_INFO_KEYS if k in server_info}
    if isinstance(identity["server"].get("launch_command"), str):
        identity["server"]["launch_command"] = hide_keys(identity["server"]["launch_command"])
    return identity


# sglang records its launch line as given, keys included; a run's records never hold one.
KEY_FLAG = re.compile(r"(--(?:admin-)?api-key)(=|\s+)(\S+)")


def hide_keys(launch_command: str) -> str:
    return KEY_FLAG.sub(r"\1\2<hidden>", launch_command)


class Service:
    """The model service a run talks to; its identity is recorded at start and end.

    ``calls`` is the run's retry layer for this server: identity requests wait out a busy
    or restarting server as chat requests do, up to the outage budget. ``api_key`` is sent
    as the bearer token (sglang's --api-key guards its identity endpoints too)."""

    def __init__(
        self,
        backend: str,
        checkpoint_id: str,
        weights: str,
        base_url: str | None = None,
        server: ModelServer | None = None,
        calls: ServerCalls | None = None,
        api_key: str | None = None,
    ) -> None:
        self.backend, self.checkpoint_id, self.weights = backend, checkpoint_id, weights
        self.base_url, self.server = base_url, server
        self.calls = calls
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.checked: dict[str, Any] = {}
        self.identity_check = "not checked"
        self.engine: Engine | None = None
        self.identified: Identified = (None, None, "not asked")
        self.model: str | None = None
        # What answers the run (serving.answerer), settled by check(); confirmed again after
        # a reconnect, at most once for every outage the run's threads saw together.
        self.answerer: Answerer | None = None
        self.confirmed_at = 0.0
        self._confirming = threading.Lock()

    @property
    def model_declared(self) -> str | None:  # the protocol's model_server.model, if any
        return self.server.model if self.server else None

    def identity(self) -> dict[str, Any]:
        """What the registry names (``registered``) and what the server reports, apart."""
        registered = {
            "checkpoint_id": self.checkpoint_id,
            "weights_fingerprint": checkpoint_fingerprint(self.weights),
        }
        if self.backend == "sim":
            return {"backend": "sim", "registered": registered, "model_path": self.weights}
        assert self.base_url is not None
        try:
            fetched = fetch_identity(
                self.base_url,
                self.server.request_timeout_s if self.server else 10.0,
                self.calls,
                self.headers,
            )
        except Unauthorized as error:
            raise ServiceError(
                f"{error}; {key_fix(self.server.api_key_env if self.server else None)}"
            ) from None
        return {"backend": self.backend, "registered": registered, **fetched}

    def check(self) -> dict[str, Any]:
        """The identity at the run's start, checked before any request; ``identity: trust``
        skips the check for a server that cannot report, and the record says so. The
        engine (how requests are spelled) and the model name to send are settled here."""
        identity = self.identity()
        if self.backend == "sim":
            self.identity_check = "in-process"
        elif self.server is not None and self.server.identity == "trust":
            self.identity_check = "trusted"
            log.warning("model server at %s is trusted unchecked (identity: trust)", self.base_url)
        else:
            assert self.server is not None, "an OpenAI-style service is made with its server"
            problems = check_identity(identity, self.server, self.weights)
            if problems:
                raise ServiceError(
                    f"model server at {self.base_url} does not match the run: "
                    + "; ".join(problems)
                    + ". Serve the registered checkpoint with the protocol's flags."
                )
            self.identity_check = "verified"
        if self.backend != "sim":
            assert self.base_url is not None
            self.model = served_model(self.model_declared, identity, self.base_url)
            self.identified = identify(identity)
            self.engine = engine_of(
                self.server.engine if self.server else None, self.identified, self.base_url
            )
        self.checked = identity
        self.answerer = self.answerer_of(identity)
        self.confirmed_at = time.monotonic()
        return identity

    def answerer_of(self, identity: dict[str, Any]) -> Answerer:
        """What answers, from one report of the server (``identity``): the model it serves
        under the name the run sends, its engine and version, its weights where reported."""
        if self.backend == "sim":
            fingerprint = identity["registered"]["weights_fingerprint"]
            return Answerer(self.checkpoint_id, "sim", None, fingerprint)
        assert self.base_url is not None and self.engine is not None, "check() comes first"
        return answerer_of(
            identity,
            served_model(self.model_declared, identity, self.base_url),
            self.engine.name,
            identify(identity)[1],
            launched=bool(self.server and self.server.launched),
        )

    def confirm(self, run: str, where: str, since: float = 0.0, identity: Any = None) -> None:
        """Read what answers again (or take ``identity``, read just now) and stop the run if
        it is not what answered it so far; skipped when it was confirmed after ``since``
        (another thread's reconnect after the same outage)."""
        assert self.answerer is not None, "check() comes first"
        with self._confirming:
            if identity is None and self.confirmed_at > since:
                return
            found = self.answerer_of(identity if identity is not None else self.identity())
            refuse_change(run, self.answerer.stamp(()), found, where)
            self.confirmed_at = time.monotonic()
        log.info("run %s: %s the model server is still %s", run, where, found.describe())

    def answered(self) -> dict[str, Any]:
        """What answered the run, as the server reported it, beside what the registry says:
        the served model id, the engine and its version, and how the protocol's sampling
        was spelled for it. Under ``identity: trust`` the registered weights are not what
        served: nothing checked them."""
        if self.backend == "sim":
            assert self.answerer is not None, "check() comes first"
            return {
                "identity": self.answerer.digest,
                "server": self.answerer.describe(),
                "weights": self.answerer.weights,
                "model": self.weights,
                "engine": "sim",
                "weights_checked": True,
                "registered": self.checked.get("registered"),
            }
        name, version, how = self.identified
        assert self.answerer is not None, "check() comes first"
        return {
            "identity": self.answerer.digest,
            "server": self.answerer.describe(),
            "weights": self.answerer.weights,
            "model": self.model,
            "models_listed": self.checked.get("models", []),
            "engine": self.engine.name if self.engine else None,
            "engine_reported": name,
            "engine_version": version,
            "engine_identified_by": how,
            "sampling_dialect": self.engine.describe() if self.engine else None,
            "weights_checked": self.identity_check == "verified",
            "registered": self.checked.get("registered"),
        }


def simulation(service: Service) -> dict[str, Any]:
    """Whether what answered the run is simulated, from what it said it is: the sim
    policy in process, or a server whose identity is the project's simulated world
    (skilleval serve-world reports the ShopSimPolicy architecture and its own launch
    line); unknown (None) when the server reported neither."""
    if service.backend == "sim":
        return {"simulated": True, "by": "the sim policy, in process"}
    info = service.checked.get("model_info", {})
    launch = str(service.checked.get("server", {}).get("launch_command") or "")
    architectures = info.get("architectures") or []
    if SIMULATED_ARCHITECTURE in architectures or launch.startswith("skilleval serve-world"):
        return {
            "simulated": True,
            "by": "the project's simulated world (skilleval serve-world)",
        }
    engine, version, how = service.identified
    if not architectures and not launch and engine is None:
        return {
            "simulated": None,
            "by": "the server reported neither its architecture, its launch command nor its engine",
        }
    served = info.get("model_path") or service.model
    named = f"{engine} {version or ''}".strip() if engine else "a model server"
    return {"simulated": False, "by": f"{named} serving {served} ({how})"}


def key_fix(api_key_env: str | None) -> str:
    """How to mend a refused key, naming the protocol's key variable."""
    if api_key_env is None:
        return (
            "the protocol sends no key (execution.model_server.api_key_env: null); fix: set "
            "execution.model_server.api_key_env to the variable that holds the server's key, "
            "and export it"
        )
    return (
        f"the key is read from ${api_key_env} (execution.model_server.api_key_env); fix: "
        "export the server's key in it"
    )


def served_model(declared: str | None, identity: dict[str, Any], base_url: str) -> str:
    """The model name every request sends: ``model_server.model`` where the protocol names
    it (and the server lists it, where it lists any), else the one model the server lists.
    A server listing several models, or none, without a declared name is refused: sending
    the first would evaluate whichever model the server happens to list first."""
    models = [str(m) for m in identity.get("models") or []]
    if declared is not None:
        if models and declared not in models:
            raise ServiceError(
                f"model server {base_url} lists {models}, not model_server.model "
                f"{declared!r}; fix: set model_server.model to the served name to evaluate"
            )
        return declared
    if len(models) == 1:
        return models[0]
    listed = f"lists {len(models)} models ({', '.join(models[:5])})" if models else "lists none"
    raise ServiceError(
        f"model server {base_url} {listed} at {base_url.rstrip('/')}/models and the protocol "
        "names none; fix: set "
        "model_server.model to the served name to evaluate"
    )
