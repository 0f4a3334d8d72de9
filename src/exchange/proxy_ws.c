/*
 * WebSocket sessions (RFC 6455): the upgrade's checks, then a relay that
 * frames both directions with ws_frame.c. The client's payloads are
 * unmasked into a copy and searched for placeholders, which are never
 * swapped in a frame; a credential host's payloads go through the scrubber,
 * afresh for each message, and leave as new frames. Owns struct ws_relay.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "core/reason.h"
#include "core/stats.h"
#include "exchange/exchange.h"
#include "parse/ws_frame.h"
#include "vault/vault.h"

/* One direction's framing state. */
struct ws_dir {
	int		 from;		/* WS_FROM_CLIENT or WS_FROM_SERVER */
	struct ws_frame	 fr;		/* the frame whose payload is flowing */
	int		 in_frame;	/* fr's header is consumed, payload owed */
	uint64_t	 off;		/* payload bytes of fr relayed so far */
	int		 in_message;	/* a data message is open (until FIN) */
	unsigned	 msg_op;	/* its opcode, text or binary */
	int		 first_out;	/* re-framing: the message's first frame left */
	int		 closed;	/* this side sent a close frame */
	int		 busy;		/* the pump runs (no re-entry from a write) */
	struct evbuffer	*stage;		/* what the pump wrote, added to the peer once */
};

struct ws_relay {
	struct ws_dir	 up;		/* client -> origin */
	struct ws_dir	 down;		/* origin -> client */
	int		 scrub;		/* a credential host: origin payloads scrubbed */
	struct evbuffer	*tmp;		/* unmasked copy, raw payload */
	struct evbuffer	*clean;		/* scrubbed payload */
};

static void	ws_read_cb(struct bufferevent *, void *);
static void	ws_write_cb(struct bufferevent *, void *);
static void	ws_event_cb(struct bufferevent *, short, void *);

/* 1 when the Upgrade value lists "websocket" (only: as its one element). */
static int
ws_upgrade_names(const struct http_header *u, int only)
{
	const char *p = u->value.p, *end = p + u->value.len, *e;
	size_t n, elems = 0;
	int found = 0;

	while (p < end) {
		e = memchr(p, ',', (size_t)(end - p));
		if (e == NULL)
			e = end;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		n = (size_t)(e - p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n > 0) {
			elems++;
			if (n == 9 && strncasecmp(p, "websocket", 9) == 0)
				found = 1;
		}
		p = e + 1;
	}
	return found && (!only || elems == 1);
}

/* A Sec-WebSocket-Extensions header naming anything. */
static int
ws_extension_named(const struct http_header *hv, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (http_header_is(&hv[i], "Sec-WebSocket-Extensions") &&
		    hv[i].value.len > 0)
			return 1;
	return 0;
}

void
ws_relay_free(struct exchange *s)
{
	struct ws_relay *ws = s->ws;

	if (ws == NULL)
		return;
	if (ws->up.stage != NULL)
		evbuffer_free(ws->up.stage);
	if (ws->down.stage != NULL)
		evbuffer_free(ws->down.stage);
	if (ws->tmp != NULL)
		evbuffer_free(ws->tmp);
	if (ws->clean != NULL)
		evbuffer_free(ws->clean);
	free(ws);
	s->ws = NULL;
}

/*
 * A credential host's frames toward the client: one scrubber for the
 * session, finished (and so started afresh) at the end of each message.
 * Made before the 101 goes out, so that failing is still a 502.
 */
static int
ws_scrub_setup(struct exchange *s)
{
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	size_t n;

	if (!cred_plan_scrubs(&s->fwd.plan))
		return 0;
	n = cred_scrub_lists(s, secrets, phs);
	if (s->fwd.scrub == NULL && (s->fwd.scrub = vault_scrubber_new(
	    s->fwd.plan.snap, secrets, phs, n)) == NULL) {
		exchange_deny(s, 502, REASON_UPSTREAM_ERROR, "cannot scrub");
		return -1;
	}
	return 0;
}

/*
 * After a 101 the gateway relays bytes it does not read only where the
 * decision needs no request seen: no methods or paths (nor a deny rule
 * that could apply to a request), no credential bound to the host, no
 * interception, no secret detection (dlp) on the request.
 * Ingress reaches a sandbox's own published port, which no rule reads.
 */
static int
ws_raw_allowed(const struct exchange *s)
{
	const struct policy_dlp *pd;

	if (s->c->kind == KIND_INGRESS)
		return 1;
	/*
	 * Under dlp: every byte the sandbox sends is read (docs/dlp.md). A
	 * path its allow: exempts is this request's exemption, not the
	 * connection's: once switched, the bytes are no request of any path
	 * (a raw relay opened on /pub/ carried a POST to /private/ unread).
	 * Only a host exempt whole is not scanned.
	 */
	pd = s->has_ident ? policy_dlp_of(s->pol, s->ident.policy) : NULL;
	return !s->verdict.inspect && s->fwd.plan.n_bound +
	    s->fwd.plan.n_also == 0 && !s->c->intercepted && s->dlp == NULL &&
	    (pd == NULL || policy_dlp_exempt(pd, s->target.host, NULL, NULL));
}

/* The head's one Upgrade field line; NULL when it has none or several. */
static const struct http_header *
ws_upgrade_field(const struct http_header *hv, size_t n)
{
	const struct http_header *u = http_header_find(hv, n, "Upgrade");

	if (u == NULL || http_header_find(u + 1, n - (size_t)(u - hv) - 1,
	    "Upgrade") != NULL)
		return NULL;
	return u;
}

/* Exactly the token "websocket" (RFC 9110 §7.8: any case). */
static int
ws_upgrade_exact(const struct http_header *hv, size_t n)
{
	const struct http_header *u = ws_upgrade_field(hv, n);

	return u != NULL && ws_upgrade_names(u, 1);
}

/* Why an offer other than exactly "websocket" cannot pass here. */
static const char *
ws_refusal(const struct exchange *s)
{
	if (s->verdict.inspect)
		return "the rule limits methods or paths: only Upgrade: "
		    "websocket may pass";
	if (s->fwd.plan.n_bound + s->fwd.plan.n_also > 0)
		return "only Upgrade: websocket may reach a credential's host";
	if (s->dlp != NULL)
		return "the request is scanned for secrets (dlp): only Upgrade: "
		    "websocket may pass";
	return "an intercepted connection: only Upgrade: websocket may pass";
}

int
ws_request_check(struct exchange *s, const struct http_request *req)
{
	const struct http_header *u;

	ws_relay_free(s);
	if (!req->upgrade)
		return 0;
	u = http_header_find(req->headers, req->n_headers, "Upgrade");
	/*
	 * h2c would carry HTTP/2 requests past every decision: the request
	 * goes on as plain HTTP/1.1 without the offer, as a server that does
	 * not speak h2c would answer it.
	 */
	if (u != NULL && u->value.len == 3 && strncasecmp(u->value.p, "h2c",
	    3) == 0) {
		s->fwd.drop_upgrade = 1;
		return 0;
	}
	/*
	 * Where bytes may not pass unread, the one upgrade the gateway can
	 * follow is a WebSocket, offered alone: "websocket, h2c" would leave
	 * the origin free to pick the other.
	 */
	if (!ws_raw_allowed(s) && !ws_upgrade_exact(req->headers,
	    req->n_headers)) {
		exchange_deny(s, 403, REASON_UPGRADE_REFUSED, ws_refusal(s));
		return -1;
	}
	if (u == NULL || !ws_upgrade_names(u, 0))
		return 0;
	if ((s->ws = calloc(1, sizeof(*s->ws))) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return -1;
	}
	return 0;
}

/*
 * The request went out, its answer is refused: decision error (as for an
 * origin's broken answer), the 101 never reaches the client, and the
 * origin connection closes with the exchange.
 */
void
ws_upgrade_refuse(struct exchange *s, const char *detail)
{
	exchange_log(s, VERDICT_ERROR, 502, REASON_UPGRADE_REFUSED);
	exchange_http_error(s, 502, REASON_UPGRADE_REFUSED, detail);
}

int
ws_upgrade_check(struct exchange *s, const struct http_response *r)
{
	int ws;

	/* s->ws: the request offered websocket (alone, where it must). */
	ws = s->ws != NULL && ws_upgrade_exact(r->headers, r->n_headers);
	if (!ws) {
		if (ws_raw_allowed(s)) {
			ws_relay_free(s);
			return 0;	/* another protocol, relayed as bytes */
		}
		ws_upgrade_refuse(s, "the origin switched to something "
		    "other than the WebSocket asked for");
		return -1;
	}
	/* None was offered: compressed frames would hide from both checks. */
	if (ws_extension_named(r->headers, r->n_headers)) {
		exchange_deny(s, 502, REASON_UPSTREAM_ENCODING,
		    "the origin negotiated a WebSocket extension");
		return -1;
	}
	return ws_scrub_setup(s) == -1 ? -1 : 1;
}

/*
 * The end of a WebSocket session the gateway decided: the row, a close
 * frame toward the client when its stream is at a frame boundary, then
 * what is queued goes out and both sides close.
 */
static void
ws_end(struct exchange *s, enum sg_verdict decision, enum sg_reason reason,
    unsigned code, const char *detail)
{
	struct ws_relay *ws = s->ws;
	struct evbuffer *out = bufferevent_get_output(s->c->cbev);
	struct ws_frame f;
	uint8_t buf[WS_HDR_MAX + 2];
	size_t n;

	log_info("session %llu: websocket to %s:%u closed: %s",
	    (unsigned long long)s->id, s->target.host, s->target.port, detail);
	exchange_log(s, decision, s->fwd.status, reason);
	s->fwd.switched = 0;	/* its row is this one */
	s->state = S_FINISHING;	/* a write callback run by the adds stays out */
	evbuffer_add_buffer(out, ws->down.stage);
	if (ws->scrub || !ws->down.in_frame) {
		memset(&f, 0, sizeof(f));
		f.fin = 1;
		f.opcode = WS_OP_CLOSE;
		f.len = 2;
		n = ws_frame_encode(&f, buf);
		buf[n++] = (uint8_t)(code >> 8);
		buf[n++] = (uint8_t)code;
		evbuffer_add(out, buf, n);
	}
	exchange_finish(s, reason_close(reason));
}

static void
ws_protocol_error(struct exchange *s, struct ws_dir *d, const char *detail)
{
	if (d->from == WS_FROM_CLIENT)
		ws_end(s, VERDICT_DENY, REASON_WS_PROTOCOL, WS_CLOSE_PROTOCOL,
		    detail);
	else
		ws_end(s, VERDICT_ERROR, REASON_WS_PROTOCOL,
		    WS_CLOSE_BAD_GATEWAY, detail);
}

static void
ws_misuse(struct exchange *s)
{
	ws_end(s, VERDICT_DENY, REASON_CRED_MISUSE, WS_CLOSE_POLICY,
	    "a credential placeholder in a client frame");
}

static const char *
ws_parse_error(int rc)
{
	switch (rc) {
	case WS_ERR_RSV:
		return "an RSV bit without a negotiated extension";
	case WS_ERR_OPCODE:
		return "a reserved opcode";
	case WS_ERR_MASK:
		return "a frame masked the wrong way for its sender";
	case WS_ERR_CONTROL:
		return "a fragmented or oversized control frame";
	default:
		return "a non-minimal or oversized length";
	}
}

/* Frames out of order for the message state (RFC 6455 §5.4, §5.5.1). */
static const char *
ws_sequence_error(const struct ws_dir *d, const struct ws_frame *f)
{
	if (d->closed)
		return "a frame after the close frame";
	if (f->opcode == WS_OP_CONT && !d->in_message)
		return "a continuation frame outside a message";
	if ((f->opcode == WS_OP_TEXT || f->opcode == WS_OP_BINARY) &&
	    d->in_message)
		return "a new message inside a fragmented one";
	if (f->opcode == WS_OP_CLOSE && f->len == 1)
		return "a close frame with a one-byte payload";
	return NULL;
}

/* Unmasked copy of n payload bytes of in (after skip) into ws->tmp. */
static int
ws_unmask_copy(struct exchange *s, struct ws_dir *d, struct evbuffer *in,
    size_t skip, size_t n, uint64_t off)
{
	struct evbuffer *tmp = s->ws->tmp;
	struct evbuffer_iovec v;
	struct evbuffer_ptr at;

	evbuffer_drain(tmp, evbuffer_get_length(tmp));
	if (n == 0)
		return 0;
	if (evbuffer_reserve_space(tmp, (ev_ssize_t)n, &v, 1) != 1 ||
	    evbuffer_ptr_set(in, &at, skip, EVBUFFER_PTR_SET) == -1 ||
	    evbuffer_copyout_from(in, &at, v.iov_base, n) != (ev_ssize_t)n)
		return -1;
	ws_mask(v.iov_base, n, d->fr.key, off);
	v.iov_len = n;
	return evbuffer_commit_space(tmp, &v, 1);
}

/*
 * A client control frame's payload, judged on its own: a ping between two
 * fragments is not part of the data stream's carried tail.
 */
static int
ws_control_has_ph(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	struct cred_body_tail saved, *t = s->body_tail;
	size_t len = (size_t)d->fr.len;
	int found;

	if (s->p->n_phs == 0 || len == 0)
		return 0;
	if (ws_unmask_copy(s, d, in, d->fr.hlen, len, 0) == -1)
		return 1;	/* cannot look: refuse rather than pass unseen */
	if (t != NULL) {
		saved = *t;
		t->len = 0;
	}
	found = cred_in_body(s, s->ws->tmp, len, len, s->fwd.plan.cred,
	    sizeof(s->fwd.plan.cred));
	/* The data stream's tail as it was (none: none). */
	if (t != NULL)
		*t = saved;
	else if (s->body_tail != NULL)
		s->body_tail->len = 0;
	return found;
}

/* One scrubbed frame of the current message toward the client. */
static void
ws_emit(struct ws_dir *d, unsigned op, struct evbuffer *payload, int fin)
{
	struct ws_frame f;
	uint8_t hdr[WS_HDR_MAX];

	memset(&f, 0, sizeof(f));
	f.fin = fin;
	f.opcode = op;
	f.len = evbuffer_get_length(payload);
	evbuffer_add(d->stage, hdr, ws_frame_encode(&f, hdr));
	evbuffer_add_buffer(d->stage, payload);
}

static void
ws_emit_data(struct ws_dir *d, struct evbuffer *payload, int fin)
{
	if (evbuffer_get_length(payload) == 0 && !fin)
		return;
	ws_emit(d, d->first_out ? WS_OP_CONT : d->msg_op, payload, fin);
	d->first_out = 1;
}

/* A control frame from the origin, whole in in[0..hlen+len), scrubbed. */
static int
ws_scrub_control(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	struct ws_relay *ws = s->ws;
	uint8_t pl[WS_CONTROL_MAX];
	size_t len = (size_t)d->fr.len, keep, n;

	evbuffer_drain(in, d->fr.hlen);
	evbuffer_remove(in, pl, len);
	/* A close frame's status code is not text: only its reason is. */
	keep = d->fr.opcode == WS_OP_CLOSE && len >= 2 ? 2 : 0;
	evbuffer_drain(ws->clean, evbuffer_get_length(ws->clean));
	evbuffer_add(ws->clean, pl, keep);
	n = cred_scrub_lists(s, secrets, phs);
	if (vault_scrub_string(s->fwd.plan.snap, secrets, phs, n,
	    (const char *)pl + keep, len - keep, ws->clean) == -1)
		return -1;
	if (evbuffer_get_length(ws->clean) > WS_CONTROL_MAX)
		return -1;
	ws_emit(d, d->fr.opcode, ws->clean, 1);
	return 0;
}

/* A control frame (ping, pong, close): whole, checked, then relayed. */
static int
ws_control(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	struct ws_frame *f = &d->fr;
	size_t len = (size_t)f->len;

	if (evbuffer_get_length(in) < f->hlen + len)
		return 0;
	if (d->from == WS_FROM_CLIENT) {
		if (ws_control_has_ph(s, d, in)) {
			ws_misuse(s);
			return -1;
		}
		/* Secrets (docs/dlp.md): a ping's payload as well. */
		if (s->dlp != NULL && len > 0 && (ws_unmask_copy(s, d, in,
		    f->hlen, len, 0) == -1 || dlp_control(s, s->ws->tmp,
		    len) == -1)) {
			ws_end(s, VERDICT_DENY, REASON_SECRET_DETECTED,
			    WS_CLOSE_POLICY, "a secret in a client control frame");
			return -1;
		}
		evbuffer_remove_buffer(in, d->stage, f->hlen + len);
	} else if (s->ws->scrub) {
		if (ws_scrub_control(s, d, in) == -1) {
			ws_end(s, VERDICT_ERROR, REASON_UPSTREAM_ENCODING,
			    WS_CLOSE_BAD_GATEWAY, "a scrubbed control frame "
			    "would exceed 125 bytes");
			return -1;
		}
	} else
		evbuffer_remove_buffer(in, d->stage, f->hlen + len);
	if (f->opcode == WS_OP_CLOSE)
		d->closed = 1;
	return 1;
}

/* A data frame's header: passed on as it is, or (scrubbing) re-framed later. */
static void
ws_data_header(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	int rebuild = d->from == WS_FROM_SERVER && s->ws->scrub;

	if (rebuild)
		evbuffer_drain(in, d->fr.hlen);
	else
		evbuffer_remove_buffer(in, d->stage, d->fr.hlen);
	d->in_frame = 1;
	d->off = 0;
	if (d->fr.opcode == WS_OP_CONT)
		return;
	d->in_message = 1;
	d->msg_op = d->fr.opcode;
	d->first_out = 0;
}

/* The next frame header: 1 consumed (control frames whole), 0 wait, -1 end. */
static int
ws_header(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	uint8_t hdr[WS_HDR_MAX];
	const char *bad;
	ev_ssize_t n;
	int rc;

	n = evbuffer_copyout(in, hdr, sizeof(hdr));
	rc = ws_frame_parse(hdr, n > 0 ? (size_t)n : 0, d->from, &d->fr);
	if (rc == WS_NEED_MORE)
		return 0;
	if (rc < 0) {
		ws_protocol_error(s, d, ws_parse_error(rc));
		return -1;
	}
	if ((bad = ws_sequence_error(d, &d->fr)) != NULL) {
		ws_protocol_error(s, d, bad);
		return -1;
	}
	if (WS_OP_IS_CONTROL(d->fr.opcode))
		return ws_control(s, d, in);
	ws_data_header(s, d, in);
	return 1;
}

/*
 * Client payload bytes: checked unmasked (a copy), relayed masked. A tail
 * that may start a placeholder waits for the rest of its frame; across
 * frames the carried tail finds it. Bytes moved, or -1 (ended).
 */
static ssize_t
ws_client_payload(struct exchange *s, struct ws_dir *d, struct evbuffer *in,
    size_t avail)
{
	uint64_t left = d->fr.len - d->off;
	size_t hold = 0;
	int found, copied = 0;

	if (s->p->n_phs > 0 && avail > 0) {
		if (ws_unmask_copy(s, d, in, 0, avail, d->off) == -1)
			found = 1;	/* cannot look: refuse rather than pass unseen */
		else {
			copied = 1;
			if (left > avail)
				hold = cred_holdback(s->p, s->ws->tmp, avail);
			found = cred_in_body(s, s->ws->tmp, avail, avail - hold,
			    s->fwd.plan.cred, sizeof(s->fwd.plan.cred));
		}
		if (found) {
			ws_misuse(s);
			return -1;
		}
	}
	/* Secrets (docs/dlp.md): the bytes about to move, unmasked. */
	if (s->dlp != NULL && avail > hold && ((!copied && ws_unmask_copy(s, d,
	    in, 0, avail, d->off) == -1) || dlp_payload(s, s->ws->tmp,
	    avail - hold, "websocket") == -1)) {
		ws_end(s, VERDICT_DENY, REASON_SECRET_DETECTED, WS_CLOSE_POLICY,
		    "a secret in a client frame");
		return -1;
	}
	evbuffer_remove_buffer(in, d->stage, avail - hold);
	return (ssize_t)(avail - hold);
}

/* Origin payload bytes of a credential host: scrubbed, re-framed. */
static ssize_t
ws_origin_payload(struct exchange *s, struct ws_dir *d, struct evbuffer *in,
    size_t avail)
{
	struct ws_relay *ws = s->ws;

	evbuffer_drain(ws->tmp, evbuffer_get_length(ws->tmp));
	evbuffer_drain(ws->clean, evbuffer_get_length(ws->clean));
	evbuffer_remove_buffer(in, ws->tmp, avail);
	if (vault_scrub(s->fwd.scrub, ws->tmp, ws->clean) == -1) {
		ws_end(s, VERDICT_ERROR, REASON_UPSTREAM_ERROR,
		    WS_CLOSE_BAD_GATEWAY,
		    "cannot scrub");
		return -1;
	}
	ws_emit_data(d, ws->clean, 0);
	return (ssize_t)avail;
}

/* The end of a data frame, and with FIN of its message. */
static int
ws_frame_end(struct exchange *s, struct ws_dir *d)
{
	struct ws_relay *ws = s->ws;

	d->in_frame = 0;
	if (!d->fr.fin)
		return 0;
	d->in_message = 0;
	if (d->from == WS_FROM_CLIENT && s->dlp != NULL &&
	    dlp_payload_end(s, "websocket") == -1) {
		ws_end(s, VERDICT_DENY, REASON_SECRET_DETECTED, WS_CLOSE_POLICY,
		    "a secret in a client message");
		return -1;
	}
	if (d->from == WS_FROM_CLIENT || !ws->scrub)
		return 0;
	/*
	 * What the scrubber held back goes out with the message's last frame;
	 * finishing also starts it afresh for the next message.
	 */
	evbuffer_drain(ws->clean, evbuffer_get_length(ws->clean));
	if (vault_scrub_finish(s->fwd.scrub, ws->clean) == -1) {
		ws_end(s, VERDICT_ERROR, REASON_UPSTREAM_ERROR,
		    WS_CLOSE_BAD_GATEWAY,
		    "cannot scrub");
		return -1;
	}
	ws_emit_data(d, ws->clean, 1);
	return 0;
}

/* Payload of the current data frame: 1 progress, 0 wait, -1 ended. */
static int
ws_payload(struct exchange *s, struct ws_dir *d, struct evbuffer *in)
{
	uint64_t left = d->fr.len - d->off;
	size_t len = evbuffer_get_length(in), avail;
	ssize_t n;

	avail = left < len ? (size_t)left : len;
	if (left > 0 && avail == 0)
		return 0;
	if (d->from == WS_FROM_CLIENT)
		n = ws_client_payload(s, d, in, avail);
	else if (s->ws->scrub)
		n = ws_origin_payload(s, d, in, avail);
	else
		n = evbuffer_remove_buffer(in, d->stage, avail);
	if (n < 0)
		return -1;
	d->off += (uint64_t)n;
	if (d->off == d->fr.len)
		return ws_frame_end(s, d) == -1 ? -1 : 1;
	return n > 0;
}

/* The relay still runs: nothing above ended or freed the exchange's sides. */
static int
ws_live(const struct exchange *s)
{
	return !s->closing && s->state == S_RELAY;
}

/*
 * Frame by frame from src to its peer, until the input runs out, the
 * peer's output is over PROXY_HWM (reads pause; ws_write_cb resumes;
 * all: at EOF, no pause) or the exchange ended.
 */
static void
ws_pump(struct exchange *s, struct bufferevent *src, int all)
{
	struct ws_relay *ws = s->ws;
	struct ws_dir *d = src == s->c->cbev ? &ws->up : &ws->down;
	struct bufferevent *dst = src == s->c->cbev ? EXCHANGE_OBEV(s) : s->c->cbev;
	struct evbuffer *in = bufferevent_get_input(src);
	struct evbuffer *out = bufferevent_get_output(dst);
	int r = 1;

	if (d->busy)
		return;
	d->busy = 1;
	while (r == 1 && (all || evbuffer_get_length(out) +
	    evbuffer_get_length(d->stage) <= PROXY_HWM))
		r = d->in_frame ? ws_payload(s, d, in) : ws_header(s, d, in);
	d->busy = 0;
	if (r == -1 || !ws_live(s))
		return;
	/* One add per pass: a TLS filter writes a record per add. */
	evbuffer_add_buffer(out, d->stage);
	/* A TLS filter may have run our write callback, and it the peer's pump. */
	if (ws_live(s) && evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(src, EV_READ);
}

static void
ws_read_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;

	exchange_touch(s);
	if (ws_live(s))
		ws_pump(s, bev, 0);
}

static void
ws_write_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	struct bufferevent *peer = bev == s->c->cbev ? EXCHANGE_OBEV(s) : s->c->cbev;

	if (!ws_live(s))
		return;
	if (bev == EXCHANGE_OBEV(s) && s->eof_client) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			exchange_close(s, CLOSE_DONE);
		return;
	}
	/* Output drained: the other side reads again, and what waited goes. */
	bufferevent_enable(peer, EV_READ);
	ws_pump(s, peer, 0);
}

static void
ws_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;

	if (!(what & BEV_EVENT_EOF)) {
		exchange_close(s,
		    (what & BEV_EVENT_TIMEOUT) ? CLOSE_TIMEOUT :
		    bev == s->c->cbev ? CLOSE_CLIENT_ERROR : CLOSE_ORIGIN_ERROR);
		return;
	}
	if (ws_live(s))
		ws_pump(s, bev, 1);
	if (!ws_live(s))
		return;
	if (bev == EXCHANGE_OBEV(s)) {
		/* What the origin sent goes out (and close_notify), then close. */
		exchange_finish(s, CLOSE_DONE);
		return;
	}
	/* What the client sent goes to the origin, then both close. */
	s->eof_client = 1;
	bufferevent_disable(bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(EXCHANGE_OBEV(s))) == 0)
		exchange_close(s, CLOSE_DONE);
}

/*
 * The row counts every byte of frames that arrived from each side, as
 * they arrive: a count of what a pass consumed misses what a TLS filter
 * adds to the input during the pass, and the last pass of an exchange that
 * ends in it.
 */
static void
ws_arrived_up_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct exchange *s = arg;

	(void)b;
	s->up += info->n_added;
}

static void
ws_arrived_down_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct exchange *s = arg;

	(void)b;
	s->down += info->n_added;
}

void
ws_relay_start(struct exchange *s)
{
	struct ws_relay *ws = s->ws;

	if (upstream_guard(s) == -1)
		return;
	conn_tunnel_opened(s, STATS_TUN_WEBSOCKET);
	ws->up.from = WS_FROM_CLIENT;
	ws->down.from = WS_FROM_SERVER;
	ws->up.stage = evbuffer_new();
	ws->down.stage = evbuffer_new();
	ws->tmp = evbuffer_new();
	ws->clean = evbuffer_new();
	if (ws->up.stage == NULL || ws->down.stage == NULL || ws->tmp == NULL ||
	    ws->clean == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	ws->scrub = s->fwd.scrub != NULL;
	/* Frames that came with the 101, or right after the request, too. */
	s->up += evbuffer_get_length(bufferevent_get_input(s->c->cbev));
	s->down += evbuffer_get_length(bufferevent_get_input(EXCHANGE_OBEV(s)));
	if (evbuffer_add_cb(bufferevent_get_input(s->c->cbev), ws_arrived_up_cb,
	    s) == NULL || evbuffer_add_cb(bufferevent_get_input(EXCHANGE_OBEV(s)),
	    ws_arrived_down_cb, s) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	if (s->body_tail != NULL)
		s->body_tail->len = 0;
	s->state = S_RELAY;
	if (s->c->timer != NULL)
		evtimer_del(s->c->timer);
	bufferevent_setcb(s->c->cbev, ws_read_cb, ws_write_cb, ws_event_cb, s);
	bufferevent_setcb(EXCHANGE_OBEV(s), ws_read_cb, ws_write_cb, ws_event_cb, s);
	bufferevent_setwatermark(s->c->cbev, EV_READ, 0, PROXY_READ_HWM);
	bufferevent_setwatermark(EXCHANGE_OBEV(s), EV_READ, 0, PROXY_READ_HWM);
	bufferevent_enable(s->c->cbev, EV_READ | EV_WRITE);
	bufferevent_enable(EXCHANGE_OBEV(s), EV_READ | EV_WRITE);
	/* Frames that came with the 101, or right after the request. */
	ws_pump(s, EXCHANGE_OBEV(s), 0);
	if (ws_live(s))
		ws_pump(s, s->c->cbev, 0);
}
