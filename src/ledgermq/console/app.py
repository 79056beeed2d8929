"""The console's web application: pages, their live fragments, and the actions they post.

Every page is rendered on the server from ``views`` and ``messages``; the part of a page that
changes (a table of replicas, offsets, lag) is also served alone under ``/live/...``, which
``static/console.js`` fetches every few seconds and swaps in. Actions are plain HTML forms
posted to the server, which answers with a redirect (post / redirect / get), so a reload never
repeats an action.

Errors never reach the user as a traceback: a cluster that cannot be reached or refuses a
request is a page (or a banner, for a live fragment or an action) that says what failed and at
which address; anything unexpected is logged here and shown as a short error page.

Forms carry a per-process token, and with a loopback listen address only loopback host names
are served, so another web site open in the same browser can neither post actions to the
console (cross-site request forgery) nor read it through a DNS name it rebinds to 127.0.0.1.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ledgermq.clock import SystemClock
from ledgermq.console import config_view, history, search, traces, views
from ledgermq.console import messages as message_views
from ledgermq.console.access import AclMode, ConsoleAccess, SignInRefusedError, is_refusal
from ledgermq.console.headers import SECURITY_HEADER_FIELDS, SecurityHeaders
from ledgermq.console.link import PRODUCER_GROUP
from ledgermq.console.names import reserved_group_problem, reserved_topic_problem
from ledgermq.console.rates import Rates
from ledgermq.console.sessions import COOKIE, Session, Sessions
from ledgermq.errors import (
    ConfigError,
    LedgerMQError,
    MessageFormatError,
    MQResponseError,
    NetworkError,
    TopicNotFoundError,
)
from ledgermq.wire import MQResponseCode, read_message_id

if TYPE_CHECKING:
    from starlette.middleware.base import RequestResponseEndpoint
    from starlette.requests import Request

    from ledgermq.client import Admin
    from ledgermq.clock import Clock
    from ledgermq.console.link import ClusterLink
    from ledgermq.wire import MessageExt

__all__ = ["GROUP_SETTINGS", "create_app"]

log = logging.getLogger(__name__)

LIVE_INTERVAL_MS: Final = 2000
"""How often a page's live part is fetched again (polling: it needs no server state and goes
through any proxy; two seconds is live enough for offsets and lag, and cheap for the cluster)."""

GROUP_SETTINGS: Final = (
    ("consumeEnable", "may consume", "bool", True),
    ("consumeMessageOrderly", "orderly", "bool", False),
    ("consumeBroadcastEnable", "broadcasting allowed", "bool", True),
    ("consumeFromMinEnable", "a new client starts at the first offset", "bool", True),
    ("retryMaxTimes", "deliveries before the DLQ", "int", 16),
    ("retryQueueNums", "queues of its retry topic", "int", 1),
)
"""Subscription group settings the Consumer groups page edits: RocketMQ's field, its label,
its type and RocketMQ's default."""

_CLUSTER_ERRORS: Final = (LedgerMQError, OSError, TimeoutError)
_MAX_FORM_BYTES: Final = 5 << 20
"""Largest form accepted: a test message up to RocketMQ's default maxMessageSize (4 MiB),
URL-encoded."""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ledgermq.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ms"] = message_views.format_ms
    env.filters["q"] = lambda text: quote(str(text), safe="")
    return env


class _Console:
    """The handlers, holding what they share: the cluster link, templates and the form token."""

    def __init__(
        self,
        link: ClusterLink,
        clock: Clock,
        access: ConsoleAccess,
        history_interval_s: float = history.DEFAULT_INTERVAL_S,
    ) -> None:
        self.link = link
        self.clock = clock
        self.access = access
        self.sessions = Sessions(clock)
        self.rates = Rates(clock)
        self.history = history.History(clock, history_interval_s)
        self.sampler = history.Sampler(self.sampling_link, self.history)
        self.templates = Jinja2Templates(env=_environment())
        self.token = secrets.token_urlsafe(24)
        """The forms' token while nobody signs in (a signed-in session has its own)."""

    # --------------------------------------------------------------------- sign-in
    @staticmethod
    def session_of(request: Request) -> Session | None:
        session = request.scope.get("ledgermq.session")
        assert session is None or isinstance(session, Session)
        return session

    def link_of(self, request: Request) -> ClusterLink:
        """The signed-in operator's link, or the console's own when nobody signs in."""
        session = self.session_of(request)
        return self.link if session is None else session.link

    async def sampling_link(self) -> ClusterLink | None:
        """The link the charts are sampled through: the console's own, or while visitors
        sign in, the most recently active operator's (None when nobody is signed in)."""
        if await self.access.sign_in_required():
            return self.sessions.newest_link()
        return self.link

    def token_of(self, request: Request) -> str:
        session = self.session_of(request)
        return self.token if session is None else session.token

    async def gate(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        """Find the request's session; without one, while the cluster enforces ACL, send the
        browser to the sign-in page (a live fragment gets a banner that links to it)."""
        path = request.url.path
        if path.startswith("/static/") or path == "/login":
            return await call_next(request)
        await self.sessions.expire()
        session = self.sessions.find(request.cookies.get(COOKIE))
        if session is None and await self.access.sign_in_required():
            if path.startswith("/live/"):
                return self.render(
                    request,
                    "_error.html",
                    401,
                    title="Signed out",
                    detail="sign in again (reload the page)",
                )
            here = path + (f"?{request.url.query}" if request.url.query else "")
            target = "/login" if request.method != "GET" else f"/login?next={quote(here)}"
            return RedirectResponse(target, status_code=303)
        request.scope["ledgermq.session"] = session
        return await call_next(request)

    async def login_page(self, request: Request) -> Response:
        if not await self.access.sign_in_required():
            return self.back("/")
        return self.render(
            request, "login.html", next=_local_path(request.query_params.get("next", "/"))
        )

    async def login(self, request: Request) -> Response:
        fields = await self.form(request)
        target = _local_path(fields.get("next", "/"))
        try:
            link = await self.access.sign_in(
                fields.get("access_key", ""),
                fields.get("secret_key", ""),
                request.client.host if request.client is not None else "",
            )
        except SignInRefusedError as exc:
            return self.back("/login", error=f"not signed in: {exc}", next=target)
        except _CLUSTER_ERRORS as exc:
            return self.back(
                "/login", error=f"the cluster could not check the account: {exc}", next=target
            )
        await self.sessions.close(request.cookies.get(COOKIE))  # a new id on every sign-in
        session_id = await self.sessions.open(
            link.credentials.access_key if link.credentials else "", link
        )
        response = self.back(target)
        response.set_cookie(
            COOKIE,
            session_id,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        await self.form(request)
        await self.sessions.close(request.cookies.get(COOKIE))
        response = self.back("/login", notice="signed out")
        response.delete_cookie(COOKIE, httponly=True, samesite="strict")
        return response

    # --------------------------------------------------------------------- rendering
    def render(
        self, request: Request, template: str, status_code: int = 200, /, **context: Any
    ) -> Response:
        context |= {
            "namesrv": self.link.namesrv_addr,
            "token": self.token_of(request),
            "account": session.access_key if (session := self.session_of(request)) else "",
            "live_ms": LIVE_INTERVAL_MS,
            "notice": request.query_params.get("notice", ""),
            "failure": request.query_params.get("error", ""),
            "path": request.url.path,
            "query": request.url.query,
        }
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)

    async def form(self, request: Request) -> dict[str, str]:
        """The posted form's fields; 403 unless it carries the session's token (or this
        process's, when nobody signs in) and, if the browser says where it was posted from,
        was posted from this console.

        The forms are URL-encoded (none uploads files), so they are parsed here with the
        standard library rather than with Starlette's multipart parser, one dependency less."""
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, "this form was posted from another web site")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM_BYTES:
                raise HTTPException(413, f"a form may have at most {_MAX_FORM_BYTES} bytes")
        fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        # bytes: compare_digest refuses str that is not ASCII, and a form may post anything
        token = self.token_of(request)
        if not secrets.compare_digest(fields.get("token", "").encode(), token.encode()):
            raise HTTPException(403, "this form is stale or not from this console: reload it")
        return fields

    @staticmethod
    def back(url: str, **params: str) -> RedirectResponse:
        """Redirect (303: the browser GETs it) to ``url`` with a notice or error banner."""
        query = urlencode({k: v for k, v in params.items() if v})
        return RedirectResponse(f"{url}?{query}" if query else url, status_code=303)

    # --------------------------------------------------------------------- cluster
    async def cluster(self, request: Request) -> Response:
        template = "_cluster.html" if request.url.path.startswith("/live/") else "cluster.html"
        groups = await views.cluster_view(self.link_of(request).admin)
        rates: dict[str, tuple[float | None, float | None]] = {
            r.address: (
                self.rates.rate(f"{r.address} put", r.put_messages),
                self.rates.rate(f"{r.address} get", r.get_messages),
            )
            for g in groups
            for r in g.replicas
        }
        strips = {
            r.address: self.history.strip(f"broker {r.address} put", f"broker {r.address} get")
            for g in groups
            for r in g.replicas
        }
        return self.render(
            request,
            template,
            groups=groups,
            rates=rates,
            strips=strips,
            history_error=self.sampler.error,
        )

    async def transfer(self, request: Request) -> Response:
        fields = await self.form(request)
        broker, target = fields.get("broker", ""), fields.get("to", "")
        try:
            await self.link_of(request).admin.transfer_leadership(broker, target)
        except _CLUSTER_ERRORS as exc:
            return self.back("/", error=f"leadership of {broker} was not moved to {target}: {exc}")
        return self.back("/", notice=f"{target} now leads broker group {broker}")

    # --------------------------------------------------------------------- topics
    async def topics(self, request: Request) -> Response:
        system = request.query_params.get("system") == "1"
        rows = await views.topic_rows(self.link_of(request).admin, include_system=system)
        template = "_topics.html" if request.url.path.startswith("/live/") else "topics.html"
        tps = {r.name: self.rates.rate(f"topic {r.name} stored", r.stored) for r in rows}
        return self.render(request, template, rows=rows, system=system, tps=tps)

    async def topic(self, request: Request) -> Response:
        name = request.path_params["topic"]
        try:
            detail = await views.topic_detail(self.link_of(request).admin, name)
        except TopicNotFoundError:
            return self.render(
                request, "missing.html", 404, what="topic", name=name, back="/topics"
            )
        live = request.url.path.startswith("/live/")
        shown = {
            "topic": name,
            "detail": detail,
            "tps": self.rates.rate(f"topic {name} stored", detail.stored),
            "strip": self.history.strip(f"topic {name} put", f"topic {name} get"),
            "history_error": self.sampler.error,
        }
        if live:
            return self.render(request, "_topic.html", **shown)
        # not in the live part: finding a topic's groups asks every group's offsets
        consumers = await views.topic_consumers(self.link_of(request).admin, name)
        return self.render(request, "topic.html", consumers=consumers, **shown)

    async def create_topic(self, request: Request) -> Response:
        fields = await self.form(request)
        name = fields.get("topic", "").strip()
        admin = self.link_of(request).admin
        try:
            queues = int(fields.get("queues", "8"))
            if not fields.get("update") or name not in await admin.topic_list():
                problem = reserved_topic_problem(name, await _cluster_names(admin))
                if problem is not None:
                    raise ConfigError(problem)
            groups = await admin.create_topic(name, queues, wait_s=5.0)
        except ValueError as exc:
            return self.back("/topics", error=f"topic {name!r} was not created: {exc}")
        except _CLUSTER_ERRORS as exc:
            return self.back("/topics", error=f"topic {name!r} was not created: {exc}")
        done = "updated to" if fields.get("update") else "created with"
        return self.back(
            f"/topics/{quote(name, safe='')}",
            notice=f"topic {name} {done} {queues} queues on {', '.join(groups)}",
        )

    async def delete_topic(self, request: Request) -> Response:
        await self.form(request)
        name = request.path_params["topic"]
        try:
            await self.link_of(request).admin.delete_topic(name)
        except _CLUSTER_ERRORS as exc:
            return self.back(f"/topics/{quote(name, safe='')}", error=f"not deleted: {exc}")
        return self.back("/topics", notice=f"topic {name} deleted")

    async def send(self, request: Request) -> Response:
        fields = await self.form(request)
        name = request.path_params["topic"]
        here = f"/topics/{quote(name, safe='')}"
        try:
            producer = await self.link_of(request).producer()
            result = await producer.send(
                name,
                fields.get("body", "").encode(),
                tags=fields.get("tags") or None,
                keys=fields.get("keys", "").split() or None,
            )
        except _CLUSTER_ERRORS as exc:
            return self.back(here, error=f"the test message was not sent: {exc}")
        queue = result.message_queue
        return self.back(
            here,
            notice=f"sent {result.status.name}: message {result.offset_msg_id} in "
            f"{queue.broker_name} queue {queue.queue_id} at offset {result.queue_offset}",
            sent=result.offset_msg_id,
        )

    # --------------------------------------------------------------------- groups
    async def groups(self, request: Request) -> Response:
        system = request.query_params.get("system") == "1"
        rows = await views.group_rows(self.link_of(request).admin, include_system=system)
        template = "_groups.html" if request.url.path.startswith("/live/") else "groups.html"
        tps = {r.name: self.rates.rate(f"group {r.name} consumed", r.consumed) for r in rows}
        return self.render(
            request,
            template,
            rows=rows,
            tps=tps,
            system=system,
            settings=GROUP_SETTINGS,
            group="",
            values={},
        )

    async def group(self, request: Request) -> Response:
        name = request.path_params["group"]
        detail = await views.group_detail(self.link_of(request).admin, name)
        template = "_group.html" if request.url.path.startswith("/live/") else "group.html"
        values = next(iter(detail.settings.values()), {})
        tps = self.rates.rate(f"group {name} consumed", detail.consumed)
        return self.render(
            request,
            template,
            group=name,
            detail=detail,
            settings=GROUP_SETTINGS,
            values=values,
            tps=tps,
            reserved=None if detail.exists else reserved_group_problem(name),
            subscriptions=detail.subscriptions,
        )

    async def update_group(self, request: Request) -> Response:
        fields = await self.form(request)
        name = fields.get("group", "").strip()
        admin = self.link_of(request).admin
        try:
            settings = _group_settings(fields)
            if name not in await admin.consumer_groups():
                problem = reserved_group_problem(name)
                if problem is not None:
                    raise ConfigError(problem)
            brokers = await admin.update_group(name, **settings)
        except _CLUSTER_ERRORS as exc:
            return self.back("/groups", error=f"group {name!r} was not saved: {exc}")
        return self.back(
            f"/groups/{quote(name, safe='')}",
            notice=f"subscription group {name} saved on {', '.join(brokers)}",
        )

    async def reset_group(self, request: Request) -> Response:
        fields = await self.form(request)
        name = request.path_params["group"]
        back = f"/groups/{quote(name, safe='')}"
        topic = fields.get("topic", "").strip()
        to: str | int = fields.get("to", "latest")
        try:
            if to == "time":
                to = message_views.parse_local_time(fields.get("time", ""))
            rows = await self.link_of(request).admin.reset_offset(name, topic, to)
        except _CLUSTER_ERRORS as exc:
            return self.back(back, error=f"offsets not reset: {exc}")
        moved = ", ".join(f"{r.broker_name}/{r.queue_id} {r.before} -> {r.after}" for r in rows)
        return self.back(back, notice=f"offsets of {name} in {topic} reset: {moved}")

    async def delete_group(self, request: Request) -> Response:
        await self.form(request)
        name = request.path_params["group"]
        try:
            brokers = await self.link_of(request).admin.delete_group(name)
        except _CLUSTER_ERRORS as exc:
            return self.back(f"/groups/{quote(name, safe='')}", error=f"not deleted: {exc}")
        return self.back("/groups", notice=f"group {name} deleted on {', '.join(brokers)}")

    # --------------------------------------------------------------------- messages
    async def messages(self, request: Request) -> Response:
        params = request.query_params
        by = params.get("by", "")
        found: list[MessageExt] | None = None
        if by == "id" and params.get("id", "").strip():
            return self.back(f"/messages/{quote(params['id'].strip(), safe='')}")
        topic = params.get("topic", "").strip()
        size = search.page_size(params.get("max"))
        number = search.page_number(params.get("page"))
        limit = search.wanted(number, size)
        admin = self.link_of(request).admin
        if by == "key" and topic:
            found = await search.by_key(admin, topic, params.get("key", "").strip(), limit)
        elif by == "time" and topic:
            now_ms = int(self.clock.wall_time_s() * 1000)
            begin = message_views.parse_local_time(params.get("from") or str(now_ms - 3600_000))
            end = message_views.parse_local_time(params.get("to") or str(now_ms))
            found = await admin.messages_between(topic, begin, end, max_messages=limit)
        page = None if found is None else search.cut(found, number, size)
        rows = None if page is None else [message_views.message_view(m) for m in page.rows]
        return self.render(
            request,
            "messages.html",
            by=by or "time",
            rows=rows,
            page=page,
            params=params,
            next_url=_with_page(request, number + 1),
            prev_url=_with_page(request, number - 1),
            page_max=search.PAGE_MAX,
            search_max=search.SEARCH_MAX,
        )

    async def message(self, request: Request) -> Response:
        msg_id = request.path_params["msg_id"]
        try:
            read_message_id(msg_id)
        except MessageFormatError as exc:  # neither a msgId nor an offsetMsgId
            raise ConfigError(str(exc)) from None
        try:  # either id: the msgId a producer printed, or the offsetMsgId
            found, *_ = await self.link_of(request).admin.find_message(msg_id)
        except MQResponseError as exc:
            if exc.code != MQResponseCode.QUERY_NOT_FOUND:
                raise
            raise HTTPException(404, str(exc)) from None
        events = await self.link_of(request).admin.message_trace(found.msg_id)
        dlq = found.topic[len("%DLQ%") :] if found.topic.startswith("%DLQ%") else None
        return self.render(
            request,
            "message.html",
            m=message_views.message_view(found),
            trace=[message_views.trace_row(e) for e in events],
            dlq_group=dlq,
        )

    async def resend(self, request: Request) -> Response:
        fields = await self.form(request)
        msg_id = request.path_params["msg_id"]
        group = fields.get("group", "")
        back = f"/messages/{quote(msg_id, safe='')}"
        try:
            result = await self.link_of(request).admin.resend_from_dlq(group, msg_id)
        except _CLUSTER_ERRORS as exc:
            return self.back(back, error=f"not resent: {exc}")
        return self.back(
            f"/messages/{quote(result.offset_msg_id, safe='')}",
            notice=f"resent to %RETRY%{group}",
        )

    # --------------------------------------------------------------------- brokers
    async def broker_config(self, request: Request) -> Response:
        """A replica's settings, read-only; only for an address the NameServer lists, so the
        page cannot be used to make the console dial anything else."""
        address = request.path_params["address"]
        admin = self.link_of(request).admin
        info = await admin.cluster_info()
        replica = next(
            (
                (data.broker_name, broker_id)
                for data in info.broker_addr_table.values()
                for broker_id, addr in data.broker_addrs.items()
                if addr == address
            ),
            None,
        )
        if replica is None:
            return self.render(
                request, "missing.html", 404, what="broker replica", name=address, back="/"
            )
        query = request.query_params.get("q", "")
        rows = config_view.config_rows(await admin.broker_config(address), query)
        return self.render(
            request,
            "broker_config.html",
            address=address,
            broker_name=replica[0],
            broker_id=replica[1],
            rows=rows,
            q=query,
        )

    # --------------------------------------------------------------------- producers
    async def producers(self, request: Request) -> Response:
        group = request.query_params.get("group", "").strip()
        connections = None
        if group:
            connections = await self.link_of(request).admin.producer_connections(group)
        return self.render(
            request,
            "producers.html",
            group=group,
            connections=connections,
            console_group=PRODUCER_GROUP,
        )

    # --------------------------------------------------------------------- traces
    async def traces(self, request: Request) -> Response:
        params = request.query_params
        by = params.get("by", "id")
        trace_topic = params.get("trace_topic", "").strip() or traces.TRACE_TOPIC
        admin = self.link_of(request).admin
        found: list[traces.Traced] | None = None
        msg_id = params.get("id", "").strip()
        topic, key = params.get("topic", "").strip(), params.get("key", "").strip()
        if by == "id" and msg_id:
            try:
                read_message_id(msg_id)
            except MessageFormatError as exc:
                raise ConfigError(str(exc)) from None
            found = await traces.by_id(admin, msg_id, trace_topic)
        elif by == "key" and topic and key:
            found = await traces.by_key(admin, topic, key, trace_topic)
        return self.render(
            request,
            "traces.html",
            by=by,
            found=found,
            params=params,
            trace_topic=trace_topic,
            traced_max=traces.TRACED_MAX,
        )

    # --------------------------------------------------------------------- errors
    async def cluster_error(self, request: Request, exc: Exception) -> Response:
        """The cluster could not be reached, or refused: the page says so, with the address."""
        live = request.url.path.startswith("/live/")
        if is_refusal(exc) and self.session_of(request) is None:
            self.access.refused()
            if await self.access.sign_in_required() and not live:
                return self.back("/login", error=f"the cluster enforces ACL: sign in ({exc})")
        user_error = isinstance(exc, ConfigError | TopicNotFoundError)
        status = 400 if isinstance(exc, ConfigError) else 404 if user_error else 502
        return self.render(
            request,
            "_error.html" if live else "error.html",
            status,
            title=_title(exc),
            detail=str(exc) or type(exc).__name__,
            user_error=user_error,
        )

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self.render(
            request, "error.html", exc.status_code, title=exc.detail, detail="", user_error=True
        )

    async def unexpected(self, request: Request, exc: Exception) -> Response:
        log.exception("console: %s %s failed", request.method, request.url.path, exc_info=exc)
        return HTMLResponse(
            "<!doctype html><title>LedgerMQ console: error</title><h1>Something went wrong</h1>"
            "<p>The console hit an unexpected error; its log has the details.</p>"
            '<p><a href="/">Back to the cluster</a></p>',
            status_code=500,
            headers=SECURITY_HEADER_FIELDS,
        )


def _with_page(request: Request, number: int) -> str:
    """This search's address at page ``number``."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
    return f"{request.url.path}?{urlencode([*query, ('page', str(number))])}"


def _local_path(target: str) -> str:
    """``target`` if it is a path of this console, else ``/``: the sign-in page's ``next``
    never sends the browser to another site (``//host`` or ``/\\host`` would)."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


async def _cluster_names(admin: Admin) -> frozenset[str]:
    """The names of the clusters and broker groups: brokers register a topic of each."""
    info = await admin.cluster_info()
    return frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)


def _title(exc: Exception) -> str:
    if isinstance(exc, ConfigError):
        return "That request cannot be answered"
    if isinstance(exc, TopicNotFoundError):
        return "Not found"
    if isinstance(exc, NetworkError | OSError | TimeoutError):
        return "The cluster cannot be reached"
    return "The cluster answered with an error"


def _group_settings(fields: dict[str, str]) -> dict[str, Any]:
    """The settings of ``GROUP_SETTINGS`` a form posted: booleans as checkboxes (a form sends
    only the checked ones, so each has a hidden ``present`` marker), integers as numbers."""
    settings: dict[str, Any] = {}
    for key, label, kind, _ in GROUP_SETTINGS:
        if kind == "bool":
            if f"{key}.present" in fields:
                settings[key] = key in fields
        elif fields.get(key, "").strip():
            try:
                settings[key] = int(fields[key])
            except ValueError:
                raise ConfigError(f"{label} must be a whole number, not {fields[key]!r}") from None
    return settings


def create_app(
    link: ClusterLink,
    *,
    trusted_hosts: list[str] | None = None,
    clock: Clock | None = None,
    acl: AclMode = AclMode.AUTO,
    history_interval_s: float = history.DEFAULT_INTERVAL_S,
) -> Starlette:
    """The console for ``link``'s cluster. ``trusted_hosts``: the Host names served (None:
    any), against DNS rebinding when the console listens on loopback; ``clock``: what "the
    last hour" of the Messages page is counted from, and the sessions' age; ``acl``: whether
    visitors sign in (``access``); ``history_interval_s``: how often the brokers' counters are
    sampled for the last hour's strips. ``app.state.sessions`` holds the signed-in sessions
    and ``app.state.sampler`` the history's sampler (the server starts it, and stops both)."""
    clock = clock or SystemClock()
    console = _Console(link, clock, ConsoleAccess(link, clock, acl), history_interval_s)
    c = console
    routes = [
        Route("/login", c.login_page),
        Route("/login", c.login, methods=["POST"]),
        Route("/logout", c.logout, methods=["POST"]),
        Route("/", c.cluster),
        Route("/live/cluster", c.cluster),
        Route("/cluster/transfer", c.transfer, methods=["POST"]),
        Route("/topics", c.topics),
        Route("/live/topics", c.topics),
        Route("/topics/create", c.create_topic, methods=["POST"]),
        Route("/topics/{topic}", c.topic),
        Route("/live/topics/{topic}", c.topic),
        Route("/topics/{topic}/delete", c.delete_topic, methods=["POST"]),
        Route("/topics/{topic}/send", c.send, methods=["POST"]),
        Route("/groups", c.groups),
        Route("/live/groups", c.groups),
        Route("/groups/update", c.update_group, methods=["POST"]),
        Route("/groups/{group}", c.group),
        Route("/live/groups/{group}", c.group),
        Route("/groups/{group}/delete", c.delete_group, methods=["POST"]),
        Route("/groups/{group}/reset", c.reset_group, methods=["POST"]),
        Route("/messages", c.messages),
        Route("/messages/{msg_id}", c.message),
        Route("/messages/{msg_id}/resend", c.resend, methods=["POST"]),
        Route("/brokers/{address}/config", c.broker_config),
        Route("/producers", c.producers),
        Route("/traces", c.traces),
        Mount("/static", StaticFiles(packages=[("ledgermq.console", "static")]), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders)]  # outermost: every response, refusals too
    if trusted_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=trusted_hosts))
    middleware.append(Middleware(BaseHTTPMiddleware, dispatch=c.gate))
    handlers: dict[Any, Any] = {
        HTTPException: c.http_error,
        Exception: c.unexpected,
    }
    handlers |= dict.fromkeys(_CLUSTER_ERRORS, c.cluster_error)
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.sessions = console.sessions
    app.state.sampler = console.sampler
    return app
