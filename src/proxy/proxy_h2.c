/*
 * HTTP/2 on intercepted sessions (docs/tls.md, docs/protocols.md): nghttp2
 * speaks the protocol toward the client; every stream's fields become one
 * struct http_request (parse/h2_req.h), handed as it is to a stream's exchange
 * of its own -- a struct exchange like an in-tunnel request's -- so that it
 * is decided, swapped, scrubbed, forwarded and audited by the very code an
 * HTTP/1.1 request is. The stream's exchange has no client socket: its
 * request's payload waits in the stream (h2_stream_body), and its answer
 * comes back as fields and payload (h2_stream_response/_data/_end), never
 * as HTTP/1.1 text. Owns the nghttp2 session, the streams, their buffers,
 * the flow-control windows and the per-connection limits against hostile
 * peers.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/bufferevent_ssl.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "core/log.h"
#include "core/reason.h"
#include "parse/h2_req.h"
#include "proxy/front.h"

#define H2_BUF		(64 * 1024)	/* a stream's bytes held each way */
#define H2_WINDOW	65535		/* a stream's receive window */

struct h2_bucket {
	uint64_t	 at_ms;
	double		 tokens;
};

struct h2_stream;

struct h2_conn {
	struct exchange		*s;		/* the intercepted connection */
	nghttp2_session		*ng;
	struct event		*pump_ev;	/* stream exchanges ended: look again */
	TAILQ_HEAD(, h2_stream)	 streams;
	struct h2_bucket	 resets;	/* RST_STREAM frames received */
	struct h2_bucket	 control;	/* SETTINGS and PING frames */
	int			 terminated;
};

struct h2_stream {
	TAILQ_ENTRY(h2_stream)	 entry;
	struct h2_conn		*c;
	int32_t			 id;
	struct exchange		*x;		/* its exchange; NULL once it ended */
	struct evbuffer		*reqbody;	/* the request's payload, for its exchange */
	int			 body_new;	/* ... more of it (or its end) came */
	struct h2_req		*req;		/* while the header block comes in */
	char			 method[H2_REQ_METHOD_MAX + 1];
	int			 grpc;
	size_t			 unconsumed;	/* DATA not yet given back as window */
	char			*trailers;
	size_t			 trailers_len, trailers_cap;
	int			 trailers_bad;
	int			 x_done;
	/* the response, handed over by the stream's exchange (h2_stream_*) */
	int			 head_sent;
	int			 discard;	/* the rest of what its exchange says */
	struct evbuffer		*body;		/* payload, waiting for the window */
	int			 eof;
	int			 deferred;
	int			 h2_origin;	/* answered by an HTTP/2 origin (proxy_h2_origin.c) */
	int			 req_ended;	/* END_STREAM came and was written */
	int			 big;		/* holds its ended exchange's c->grpc_big slot */
	nghttp2_nv		*tr_nv;		/* ... its trailers, sent after the body */
	size_t			 tr_n;
};

static void	h2_flush(struct h2_conn *);

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A token bucket of rate per second, rate deep: 0 over it. */
static int
bucket_take(struct h2_bucket *b, uint32_t rate)
{
	uint64_t t = now_ms();

	if (rate == 0)
		return 1;
	if (b->at_ms == 0)
		b->tokens = rate;
	else
		b->tokens += (double)(t - b->at_ms) * rate / 1000.0;
	if (b->tokens > rate)
		b->tokens = rate;
	b->at_ms = t;
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

static void
h2_calm(struct h2_conn *c, const char *what)
{
	if (c->terminated)
		return;
	c->terminated = 1;
	log_warnx("session %llu: HTTP/2 client %s over %s: GOAWAY "
	    "ENHANCE_YOUR_CALM", (unsigned long long)c->s->id, c->s->c->client_str,
	    what);
	nghttp2_session_terminate_session(c->ng, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* ---- stream exchanges ----------------------------------------------- */

/*
 * A stream whose request and response are both complete ends its exchange:
 * the exchange lives as long as its stream. Its origin connection, if it
 * is kept alive, waits in the worker's pool, bound to the decision it
 * was opened for, for a later stream's exchange of that same decision
 * (tunnel_request: upstream_take).
 */
static void
st_maybe_release(struct h2_stream *st)
{
	struct exchange *k = st->x;

	if (k == NULL || k->closing || st->h2_origin || !st->eof ||
	    !st->req_ended || k->state != S_HEAD ||
	    evbuffer_get_length(st->reqbody) > 0)
		return;
	st->x = NULL;
	k->h2st = NULL;
	(void)upstream_keep_in(k);	/* or closed with k */
	exchange_close(k, CLOSE_DONE);
}

/*
 * The stream's exchange, on the same connection: its client, its tunnel
 * and what the tunnel decided are the connection's, shared, and start the
 * exchange -- identity, policy, target, rule and addresses.
 */
static struct exchange *
stream_exchange_new(struct h2_stream *st)
{
	struct exchange *p = st->c->s, *k;
	struct conn *c = p->c;

	if (c->tun == NULL || (k = exchange_open(p->w, c, 1)) == NULL)
		return NULL;
	k->id = ++p->w->next_session * (uint64_t)p->p->n_workers +
	    (uint64_t)p->w->index;
	k->state = S_HEAD;
	k->pol = c->tun->pol;
	policy_ref(k->pol);
	k->has_ident = c->tun->has_ident;
	k->ident = c->tun->ident;
	k->target = c->tun->target;
	memcpy(k->verdict.rule, c->tun->rule, sizeof(k->verdict.rule));
	k->idle_ms = p->idle_ms;
	k->fwd.request = 1;
	if (exchange_set_addrs(k, c->tun->addrs, c->tun->n_addrs) == -1) {
		exchange_close(k, CLOSE_NO_MEMORY);
		return NULL;
	}
	k->h2st = st;
	exchange_set_idle(k);
	return k;
}

/* From exchange_close: the stream's exchange is ending. */
static void
stream_exchange_gone(struct exchange *k)
{
	struct h2_stream *st = k->h2st;

	k->h2st = NULL;
	if (st == NULL)
		return;
	/* Its answer's slot stays taken while the stream still holds it. */
	if (k->big_slot && evbuffer_get_length(st->body) > H2_BUF) {
		k->big_slot = 0;
		st->big = 1;
	}
	st->x = NULL;
	st->x_done = 1;
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
}

static void
stream_exchange_close(struct h2_stream *st, enum sg_close why)
{
	struct exchange *k = st->x;

	if (k == NULL)
		return;
	st->x = NULL;
	k->h2st = NULL;
	exchange_close(k, why);
}

/* Body bytes nobody will read: their window goes back to the connection. */
static void
st_give_back(struct h2_stream *st)
{
	if (st->unconsumed > 0)
		nghttp2_session_consume_connection(st->c->ng, st->unconsumed);
	st->unconsumed = 0;
}

/* Its big-answer slot back once it holds H2_BUF or less (or goes). */
static void
st_big_release(struct h2_stream *st, int going)
{
	if (st->big && (going || evbuffer_get_length(st->body) <= H2_BUF)) {
		st->big = 0;
		st->c->s->c->grpc_big--;
	}
}

static void
st_free(struct h2_stream *st)
{
	/* Its answer may have gone out before the loop came round to it. */
	if (st->eof)
		st_maybe_release(st);
	stream_exchange_close(st, CLOSE_CLIENT_RESET);
	st_give_back(st);
	st_big_release(st, 1);
	TAILQ_REMOVE(&st->c->streams, st, entry);
	if (st->reqbody != NULL)
		evbuffer_free(st->reqbody);
	if (st->body != NULL)
		evbuffer_free(st->body);
	free(st->req);
	free(st->trailers);
	free(st->tr_nv);
	free(st);
}

static void
st_reset(struct h2_stream *st, uint32_t code)
{
	st->discard = 1;
	nghttp2_submit_rst_stream(st->c->ng, NGHTTP2_FLAG_NONE, st->id, code);
	stream_exchange_close(st, CLOSE_CLIENT_RESET);
}

/* ---- the response: from the stream's exchange -> HTTP/2 ------------ */

static ssize_t
st_data_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2_stream *st = src->ptr;
	int n;

	n = evbuffer_remove(st->body, buf, length);
	if (n < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	st_big_release(st, 0);
	if (evbuffer_get_length(st->body) == 0 && st->eof) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		st->discard = 1;
		if (st->tr_n > 0) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			if (nghttp2_submit_trailer(ng, id, st->tr_nv, st->tr_n) != 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
	} else if (n == 0) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	/* Room again: the stream's exchange reads on from its origin. */
	if (n > 0 && st->x != NULL && evbuffer_get_length(st->body) <
	    H2_BUF / 2)
		stream_resume(st->x);
	return n;
}

static const char *
grpc_status(int status)
{
	switch (status) {
	case 401: return "16";		/* UNAUTHENTICATED */
	case 403: return "7";		/* PERMISSION_DENIED */
	case 404: return "12";		/* UNIMPLEMENTED */
	case 415: return "12";		/* a coding not taken: UNIMPLEMENTED */
	case 429: return "8";		/* RESOURCE_EXHAUSTED */
	default: return "14";		/* UNAVAILABLE */
	}
}

/*
 * The response head as HTTP/2 fields: names lower-cased, hop-by-hop and
 * framing dropped (content-length from the gateway's own parse). A gRPC
 * call refused by the gateway gets a trailers-only answer (grpc-status).
 */
static int
st_submit_head(struct h2_stream *st, const struct http_response *r)
{
	nghttp2_nv nv[HTTP_MAX_HEADERS + 4];
	nghttp2_data_provider dp;
	char status[8], clen[24], *names;
	const struct http_header *reason = NULL;
	size_t i, n = 0, off = 0, total = 0;
	int rv, trailers_only = 0;

	for (i = 0; i < r->n_headers; i++)
		total += r->headers[i].name.len;
	if ((names = malloc(total + 1)) == NULL)
		return -1;
	snprintf(status, sizeof(status), "%d", r->status);
	nv[n++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7,
	    strlen(status), NGHTTP2_NV_FLAG_NONE };
	for (i = 0; i < r->n_headers; i++) {
		const struct http_header *h = &r->headers[i];
		size_t j;

		if (!http_header_forwardable(h, r->headers, r->n_headers))
			continue;
		if (http_header_is(h, "X-Sandgate-Reason"))
			reason = h;
		for (j = 0; j < h->name.len; j++)
			names[off + j] = (char)tolower((unsigned char)h->name.p[j]);
		nv[n++] = (nghttp2_nv){ (uint8_t *)names + off,
		    (uint8_t *)h->value.p, h->name.len, h->value.len,
		    NGHTTP2_NV_FLAG_NONE };
		off += h->name.len;
	}
	if (r->framing == HTTP_BODY_LENGTH || (r->framing == HTTP_BODY_NONE &&
	    r->has_length && r->status != 204 && r->status != 304)) {
		snprintf(clen, sizeof(clen), "%llu", (unsigned long long)
		    (r->framing == HTTP_BODY_LENGTH ? r->content_length :
		    r->declared_length));
		nv[n++] = (nghttp2_nv){ (uint8_t *)"content-length",
		    (uint8_t *)clen, 14, strlen(clen), NGHTTP2_NV_FLAG_NONE };
	}
	if (st->grpc && reason != NULL && r->status != 200) {
		trailers_only = 1;
		nv[n++] = (nghttp2_nv){ (uint8_t *)"grpc-status",
		    (uint8_t *)grpc_status(r->status), 11,
		    strlen(grpc_status(r->status)), NGHTTP2_NV_FLAG_NONE };
		nv[n++] = (nghttp2_nv){ (uint8_t *)"grpc-message",
		    (uint8_t *)reason->value.p, 12, reason->value.len,
		    NGHTTP2_NV_FLAG_NONE };
	}
	dp.source.ptr = st;
	dp.read_callback = st_data_cb;
	rv = nghttp2_submit_response(st->c->ng, st->id, nv, n,
	    r->framing == HTTP_BODY_NONE || trailers_only ? NULL : &dp);
	free(names);
	if (rv != 0)
		return -1;
	st->head_sent = 1;
	if (r->framing == HTTP_BODY_NONE || trailers_only)
		st->discard = 1;
	return 0;
}

/*
 * The stream's side of its exchange: request payload handed on (and
 * its window given back once taken), the answer's DATA resumed, a stream
 * exchange that ended before its answer did cuts the stream short.
 */
static void
st_pump(struct h2_stream *st)
{
	struct exchange *k = st->x;

	if (st->x_done)
		evbuffer_drain(st->reqbody, evbuffer_get_length(st->reqbody));
	/* Taken down to half: the window the client used comes back. */
	if (st->unconsumed > 0 && (st->x_done ||
	    evbuffer_get_length(st->reqbody) <= H2_BUF / 2)) {
		nghttp2_session_consume(st->c->ng, st->id, st->unconsumed);
		st->unconsumed = 0;
	}
	if (k != NULL && st->body_new && k->state == S_FORWARD) {
		st->body_new = 0;
		exchange_touch(k);	/* the client is sending: not idle */
		stream_client_body(k);
		if (st->x == NULL && !st->x_done)
			return;		/* the stream is being reset */
	}
	if (st->x_done && !st->eof && !st->discard) {
		st_reset(st, NGHTTP2_INTERNAL_ERROR);	/* cut short */
		return;
	}
	if (st->deferred && (st->eof || evbuffer_get_length(st->body) > 0)) {
		st->deferred = 0;
		nghttp2_session_resume_data(st->c->ng, st->id);
	}
	if (st->eof)
		st_maybe_release(st);
}

static void
pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_conn *c = arg;
	struct h2_stream *st;

	TAILQ_FOREACH(st, &c->streams, entry)
		st_pump(st);
	h2_flush(c);
}

/* ---- the stream exchange's answer: fields and payload, no HTTP/1.1 -- */

/* A response from an HTTP/2 origin: its fields as they are to go out. */
int
h2_stream_head(struct exchange *k, const nghttp2_nv *nv, size_t n, int end)
{
	struct h2_stream *st = k->h2st;
	nghttp2_data_provider dp;

	if (st == NULL || st->head_sent)
		return -1;
	dp.source.ptr = st;
	dp.read_callback = st_data_cb;
	if (nghttp2_submit_response(st->c->ng, st->id, nv, n,
	    end ? NULL : &dp) != 0)
		return -1;
	st->h2_origin = 1;
	st->head_sent = 1;
	st->eof = end;
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

/*
 * A response head as HTTP/1.1 semantics have it (an HTTP/1.1 origin's,
 * its values already scrubbed; or the gateway's own answer): r->framing
 * says whether a body follows and, when LENGTH, its content-length.
 */
int
h2_stream_response(struct exchange *k, const struct http_response *r)
{
	struct h2_stream *st = k->h2st;

	if (st == NULL || st->head_sent)
		return -1;
	if (st_submit_head(st, r) == -1)
		return -1;
	if (r->framing == HTTP_BODY_NONE)
		st->eof = 1;
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

/* Payload for the stream; dropped when its answer takes none (trailers-only). */
int
h2_stream_data(struct exchange *k, struct evbuffer *b)
{
	struct h2_stream *st = k->h2st;

	if (st == NULL || !st->head_sent || st->eof)
		return -1;
	if (st->discard) {
		evbuffer_drain(b, evbuffer_get_length(b));
		return 0;
	}
	evbuffer_add_buffer(st->body, b);
	/* An answer flowing: neither the stream nor its connection is idle. */
	exchange_touch(k);
	exchange_touch(st->c->s);
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

/* The trailers are copied whole: names and values in one block after the array. */
int
h2_stream_end(struct exchange *k, const nghttp2_nv *nv, size_t n)
{
	struct h2_stream *st = k->h2st;
	size_t i, total = 0;
	uint8_t *p;

	if (st == NULL || !st->head_sent)
		return -1;
	if (st->eof)
		return 0;
	for (i = 0; i < n; i++)
		total += nv[i].namelen + nv[i].valuelen;
	if (n > 0) {
		if ((st->tr_nv = malloc(n * sizeof(*nv) + total + 1)) == NULL)
			return -1;
		p = (uint8_t *)(st->tr_nv + n);
		for (i = 0; i < n; i++) {
			st->tr_nv[i] = nv[i];
			st->tr_nv[i].name = p;
			memcpy(p, nv[i].name, nv[i].namelen);
			p += nv[i].namelen;
			st->tr_nv[i].value = p;
			memcpy(p, nv[i].value, nv[i].valuelen);
			p += nv[i].valuelen;
		}
		st->tr_n = n;
	}
	st->eof = 1;
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

struct exchange *
h2_parent(struct exchange *k)
{
	return k->h2st != NULL ? k->h2st->c->s : NULL;
}

struct evbuffer *
h2_stream_body(struct exchange *k)
{
	return k->h2st != NULL ? k->h2st->reqbody : NULL;
}

int
h2_stream_body_end(struct exchange *k, const char **trailers, size_t *len)
{
	struct h2_stream *st = k->h2st;

	if (trailers != NULL) {
		*trailers = st != NULL ? st->trailers : NULL;
		*len = st != NULL && st->trailers != NULL ? st->trailers_len : 0;
	}
	return st != NULL && st->req_ended;
}

void
h2_stream_poke(struct exchange *k)
{
	if (k->h2st != NULL) {
		k->h2st->body_new = 1;
		event_active(k->h2st->c->pump_ev, EV_TIMEOUT, 0);
	}
}

int
h2_stream_full(struct exchange *k)
{
	return h2_stream_pending(k) >= H2_BUF;
}

size_t
h2_stream_pending(struct exchange *k)
{
	return k->h2st != NULL ? evbuffer_get_length(k->h2st->body) : 0;
}

/* ---- the request: HTTP/2 fields from the client -> an exchange ------- */

static struct h2_stream *
stream_of(struct h2_conn *c, int32_t id)
{
	return nghttp2_session_get_stream_user_data(c->ng, id);
}

/* A stream refused before its request could be written: audited, answered. */
static void
st_refuse(struct h2_stream *st, struct h2_req *q, int status,
    enum sg_reason reason, const char *detail)
{
	struct exchange *k = st->x;

	/* The refusal is the stream's exchange, as every request is one. */
	snprintf(k->fwd.method, sizeof(k->fwd.method), "%s",
	    q->has_method ? q->method : "-");
	k->fwd.path = exchange_strndup(k, q->has_path ? q->path : "",
	    q->has_path ? strlen(q->path) : 0);
	exchange_deny(k, status, reason, detail);
}

/* The size req's HTTP/1.1 head would have: limits.max_header_bytes holds for it too. */
static size_t
head_size(const struct http_request *req)
{
	size_t i, n = req->method.len + req->target.len + 13;

	for (i = 0; i < req->n_headers; i++)
		n += req->headers[i].name.len + req->headers[i].value.len + 4;
	if (req->framing == HTTP_BODY_CHUNKED)
		n += 28;
	return n;
}

static void
st_request(struct h2_stream *st, int end_stream)
{
	struct exchange *k;
	struct h2_req *q = st->req;
	struct http_request req;

	st->req = NULL;
	if ((st->x = stream_exchange_new(st)) == NULL) {
		free(q);
		st_reset(st, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	st->c->s->logged = 1;	/* the connection's rows are its streams' */
	k = st->x;
	/* Its sandbox's share holds it (docs/config.md "limits"), or 429. */
	if (stream_fair_admit(k) == -1) {
		free(q);
		return;
	}
	if (h2_req_request(q, end_stream, &req) == 0 &&
	    head_size(&req) > st->c->s->p->cfg->max_header_bytes)
		q->err = H2_REQ_ERR_TOO_LARGE;
	if (q->err != H2_REQ_OK) {
		snprintf(st->method, sizeof(st->method), "%s", q->method);
		switch (q->err) {
		case H2_REQ_ERR_TOO_LARGE:
			st_refuse(st, q, 431, REASON_HEAD_TOO_LARGE,
			    "request header list too large");
			break;
		case H2_REQ_ERR_CONNECT:
			st_refuse(st, q, 405, REASON_METHOD_NOT_SUPPORTED,
			    "CONNECT inside an HTTP/2 connection");
			break;
		case H2_REQ_ERR_HOST:
			st_refuse(st, q, 403, REASON_HOST_MISMATCH,
			    "host and :authority differ");
			break;
		default:
			st_refuse(st, q, 400, REASON_BAD_REQUEST,
			    "malformed HTTP/2 request");
			break;
		}
		free(q);
		return;
	}
	snprintf(st->method, sizeof(st->method), "%s", q->method);
	st->grpc = q->grpc;
	st->req_ended = end_stream;
	/*
	 * Decided now, by the HTTP/1.1 code, as an exchange of its own (gRPC:
	 * HTTP/2 toward the origin, docs/protocols.md); the body follows in
	 * st->reqbody.
	 */
	http_stream_request(k, &req, q->grpc);
	free(q);
}

/* END_STREAM: the request is whole; its exchange hears it from the loop. */
static void
st_data_end(struct h2_stream *st)
{
	st->req_ended = 1;
	st->body_new = 1;
	event_active(st->c->pump_ev, EV_TIMEOUT, 0);
}

/*
 * Trailers are never swapped into: a placeholder in them is refused like
 * one in a body (the stream exchange's rules, docs/credentials.md).
 */
static int
st_trailers_check(struct h2_stream *st)
{
	struct exchange *k = st->x;
	struct evbuffer *b;
	enum sg_reason why = REASON_CRED_MISUSE;
	const char *what = "a credential placeholder in request trailers";
	int found;

	if (k == NULL)
		return 0;
	if (st->trailers_bad) {
		/* Its row, as a malformed head's: refused, bad-request. */
		if (!k->closing && !k->logged)
			exchange_log(k, VERDICT_DENY, k->fwd.status,
			    REASON_BAD_REQUEST);
		st_reset(st, NGHTTP2_PROTOCOL_ERROR);
		return -1;
	}
	if (st->trailers_len == 0 || (b = evbuffer_new()) == NULL)
		return st->trailers_len == 0 ? 0 : -1;
	evbuffer_add(b, st->trailers, st->trailers_len);
	found = cred_in_body(k, b, st->trailers_len, st->trailers_len,
	    k->fwd.plan.cred, sizeof(k->fwd.plan.cred));
	evbuffer_free(b);
	/* Secrets (docs/dlp.md): trailer fields are scanned like headers. */
	if (!found && k->c->kind != KIND_INGRESS &&
	    (found = dlp_trailers(k, st->trailers, st->trailers_len)) != 0) {
		why = found == 1 ? REASON_SECRET_DETECTED :
		    REASON_INTERNAL_ERROR;
		what = found == 1 ? "a secret in request trailers" :
		    "cannot scan the request's trailers for secrets";
	}
	if (!found)
		return 0;
	/* The head was decided when it came (st_request): the row names it. */
	if (k->closing)
		return -1;
	if (!k->fwd.resp_head_done && k->state != S_HEAD) {
		exchange_deny(k, why == REASON_INTERNAL_ERROR ? 503 : 403, why,
		    what);
		return -1;
	}
	exchange_log(k, VERDICT_DENY, k->fwd.status, why);
	st_reset(st, NGHTTP2_REFUSED_STREAM);
	return -1;
}

static int
on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2_conn *c = arg;
	const struct config *cfg = c->s->p->cfg;
	struct h2_stream *st;
	size_t cap = cfg->h2_max_header_list;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if ((st = calloc(1, sizeof(*st))) == NULL ||
	    (st->body = evbuffer_new()) == NULL ||
	    (st->reqbody = evbuffer_new()) == NULL ||
	    (st->req = malloc(sizeof(*st->req) + 2 * cap)) == NULL) {
		if (st != NULL && st->body != NULL)
			evbuffer_free(st->body);
		if (st != NULL && st->reqbody != NULL)
			evbuffer_free(st->reqbody);
		free(st);
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	h2_req_init(st->req, (char *)(st->req + 1), (char *)(st->req + 1) + cap,
	    cap, cap);
	st->c = c;
	st->id = f->hd.stream_id;
	TAILQ_INSERT_TAIL(&c->streams, st, entry);
	nghttp2_session_set_stream_user_data(ng, st->id, st);
	return 0;
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
    void *arg)
{
	struct h2_conn *c = arg;
	struct h2_stream *st = stream_of(c, f->hd.stream_id);
	size_t cap;

	if (st == NULL || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (st->req != NULL) {
		h2_req_add(st->req, name, namelen, value, valuelen);
		return 0;
	}
	/* Trailers: bounded like the head. */
	cap = c->s->p->cfg->h2_max_header_list;
	if (st->trailers == NULL && (st->trailers = malloc(cap)) == NULL)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	st->trailers_cap = cap;
	if (h2_req_trailer(name, namelen, value, valuelen, st->trailers,
	    st->trailers_cap, &st->trailers_len) == -1)
		st->trailers_bad = 1;
	return 0;
}

/*
 * A RST_STREAM we send because of the client's frames (a window update
 * that overflows, a frame on a closed stream, a malformed head, a stream
 * over the limit) costs us what its own RST_STREAM does -- the origin
 * request already under way ends -- so it counts toward the same limit
 * ("MadeYouReset", CVE-2025-8671): else a client churns origin requests
 * without ever sending a reset.
 */
static int
on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2_conn *c = arg;

	(void)ng;
	if (f->hd.type != NGHTTP2_RST_STREAM)
		return 0;
	switch (f->rst_stream.error_code) {
	case NGHTTP2_PROTOCOL_ERROR:
	case NGHTTP2_FLOW_CONTROL_ERROR:
	case NGHTTP2_STREAM_CLOSED:
	case NGHTTP2_FRAME_SIZE_ERROR:
	case NGHTTP2_REFUSED_STREAM:
		if (!bucket_take(&c->resets, c->s->p->cfg->h2_max_resets))
			h2_calm(c, "limits.http2.max_resets_per_second "
			    "(resets its frames caused)");
		break;
	default:
		break;
	}
	return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2_conn *c = arg;
	const struct config *cfg = c->s->p->cfg;
	struct h2_stream *st;
	int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	switch (f->hd.type) {
	case NGHTTP2_RST_STREAM:
		if (!bucket_take(&c->resets, cfg->h2_max_resets))
			h2_calm(c, "limits.http2.max_resets_per_second");
		return 0;
	case NGHTTP2_PING:
	case NGHTTP2_SETTINGS:
		if (!(f->hd.flags & NGHTTP2_FLAG_ACK) &&
		    !bucket_take(&c->control, cfg->h2_max_control))
			h2_calm(c, "limits.http2.max_control_per_second");
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	if ((st = stream_of(c, f->hd.stream_id)) == NULL || c->terminated)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && st->req != NULL) {
		st_request(st, end);
		return 0;
	}
	if (f->hd.type == NGHTTP2_HEADERS && st_trailers_check(st) == -1)
		return 0;
	if (end)
		st_data_end(st);
	return 0;
}

static int
on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2_conn *c = arg;
	struct h2_stream *st = stream_of(c, id);

	if (st == NULL || st->x == NULL) {
		nghttp2_session_consume(ng, id, len);	/* nobody reads it */
		return 0;
	}
	if (evbuffer_add(st->reqbody, data, len) == -1)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	/* Past H2_BUF the window comes back once the stream's exchange took them. */
	if (evbuffer_get_length(st->reqbody) <= H2_BUF)
		nghttp2_session_consume(ng, id, len);
	else
		st->unconsumed += len;
	st->body_new = 1;
	event_active(c->pump_ev, EV_TIMEOUT, 0);
	return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2_conn *c = arg;
	struct h2_stream *st = stream_of(c, id);

	if (st == NULL)
		return 0;
	nghttp2_session_set_stream_user_data(ng, id, NULL);
	st_free(st);
	return 0;
}

static ssize_t
on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct h2_conn *c = arg;
	struct evbuffer *out = bufferevent_get_output(c->s->c->cbev);

	if (evbuffer_get_length(out) > PROXY_HWM)
		return NGHTTP2_ERR_WOULDBLOCK;	/* h2_write_cb goes on */
	if (evbuffer_add(out, data, len) == -1)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return (ssize_t)len;
}

/* ---- the connection ------------------------------------------------- */

static void
h2_flush(struct h2_conn *c)
{
	struct exchange *s = c->s;

	if (s->closing || s->state == S_FINISHING)
		return;
	if (nghttp2_session_send(c->ng) != 0) {
		exchange_close(s, CLOSE_CLIENT_ERROR);
		return;
	}
	if (!nghttp2_session_want_read(c->ng) &&
	    !nghttp2_session_want_write(c->ng))
		exchange_finish(s, CLOSE_DONE);
}

/* The GOAWAY code for what ended reading: a flood is not a mistake. */
static uint32_t
h2_fatal_code(int err)
{
	switch (err) {
	case NGHTTP2_ERR_FLOODED:
	case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
	case NGHTTP2_ERR_TOO_MANY_SETTINGS:
		return NGHTTP2_ENHANCE_YOUR_CALM;
	default:
		return NGHTTP2_PROTOCOL_ERROR;
	}
}

static void
h2_read_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	struct h2_conn *c = s->c->h2;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_iovec v[8];
	ssize_t r;
	int i, n;

	exchange_touch(s);
	while (evbuffer_get_length(in) > 0 && !s->closing) {
		n = evbuffer_peek(in, -1, NULL, v, 8);
		if (n > 8)
			n = 8;
		for (i = 0; i < n; i++) {
			r = nghttp2_session_mem_recv(c->ng, v[i].iov_base,
			    v[i].iov_len);
			if (r < 0) {
				log_info("session %llu: HTTP/2 from %s: %s",
				    (unsigned long long)s->id, s->c->client_str,
				    nghttp2_strerror((int)r));
				evbuffer_drain(in, evbuffer_get_length(in));
				if (!c->terminated)
					nghttp2_session_terminate_session(c->ng,
					    h2_fatal_code((int)r));
				c->terminated = 1;
				(void)nghttp2_session_send(c->ng);
				exchange_finish(s, CLOSE_CLIENT_ERROR);
				return;
			}
			if (s->closing)
				return;
		}
		for (i = 0; i < n; i++)
			evbuffer_drain(in, v[i].iov_len);
	}
	h2_flush(c);
}

static void
h2_write_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;

	if (s->c->h2 != NULL && nghttp2_session_want_write(s->c->h2->ng))
		h2_flush(s->c->h2);
}

static int
h2_settings(struct h2_conn *c)
{
	const struct config *cfg = c->s->p->cfg;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->h2_max_streams },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg->h2_max_header_list },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
	};

	if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv,
	    sizeof(iv) / sizeof(iv[0])) != 0)
		return -1;
	/* Streams share it; each is bounded by its own window and H2_BUF. */
	return nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE,
	    0, (int32_t)cfg->h2_max_streams * H2_WINDOW);
}

static int
h2_session_new(struct h2_conn *c)
{
	const struct config *cfg = c->s->p->cfg;
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	int rv;

	if (nghttp2_session_callbacks_new(&cb) != 0)
		return -1;
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		return -1;
	}
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
	    on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_continuations(opt, cfg->h2_max_continuations);
	nghttp2_option_set_max_outbound_ack(opt, 1000);
	nghttp2_option_set_max_settings(opt, 32);
	nghttp2_option_set_no_closed_streams(opt, 1);
	rv = nghttp2_session_server_new2(&c->ng, cb, c, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	return rv == 0 ? 0 : -1;
}

/* The client chose h2 in ALPN: from here the connection is HTTP/2. */
void
h2_start(struct exchange *s)
{
	struct h2_conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	c->s = s;
	TAILQ_INIT(&c->streams);
	s->c->h2 = c;
	if ((c->pump_ev = event_new(s->w->base, -1, 0, pump_cb, c)) == NULL ||
	    h2_session_new(c) == -1 || h2_settings(c) != 0) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	s->state = S_RELAY;
	bufferevent_setcb(s->c->cbev, h2_read_cb, h2_write_cb,
	    client_event_cb, s);
	bufferevent_setwatermark(s->c->cbev, EV_READ, 0, PROXY_READ_HWM);
	bufferevent_setwatermark(s->c->cbev, EV_WRITE, PROXY_HWM / 2, 0);
	bufferevent_enable(s->c->cbev, EV_READ | EV_WRITE);
	h2_read_cb(s->c->cbev, s);
}

/* 1 when the client chose h2 (checked once, before the first request). */
int
h2_chosen(struct exchange *s)
{
	const unsigned char *alpn;
	unsigned int len;
	SSL *ssl;

	if (!s->c->intercepted || s->is_stream || s->c->kind == KIND_INGRESS ||
	    s->c->h2_checked)
		return 0;
	s->c->h2_checked = 1;
	if ((ssl = bufferevent_openssl_get_ssl(s->c->cbev)) == NULL)
		return 0;
	SSL_get0_alpn_selected(ssl, &alpn, &len);
	return len == 2 && memcmp(alpn, "h2", 2) == 0;
}

/* From exchange_close: the streams' exchanges end with the connection. */
static void
h2_free(struct exchange *s)
{
	struct h2_conn *c = s->c->h2;
	struct h2_stream *st;

	if (c == NULL || s->c->x != s)
		return;		/* a stream's exchange: the streams stay */
	s->c->h2 = NULL;
	while ((st = TAILQ_FIRST(&c->streams)) != NULL) {
		stream_exchange_close(st, CLOSE_CLIENT_CLOSED);
		st_free(st);
	}
	if (c->ng != NULL)
		nghttp2_session_del(c->ng);
	if (c->pump_ev != NULL)
		event_free(c->pump_ev);
	free(c);
}

int
h2_streams_live(struct exchange *s)
{
	struct h2_conn *c = s->c->h2;
	struct h2_stream *st;
	int n = 0;

	if (c == NULL || s->c->x != s)
		return 0;
	TAILQ_FOREACH(st, &c->streams, entry)
		if (st->x != NULL)
			n++;
	return n;
}

void
h2_closed(struct exchange *s)
{
	if (s->h2st != NULL)
		stream_exchange_gone(s);	/* its stream reads what is left */
	h2_free(s);		/* a connection's streams end with it */
}
