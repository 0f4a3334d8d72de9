/*
 * The ingress listener (docs/ingress.md): a request for PORT-
 * ID.<ingress_domain> is checked (sandbox, published port, running, token) and
 * reverse-proxied to that port of the sandbox's guest address through the
 * forward machinery. Owns the ingress TLS context and the token's cookie flow;
 * the egress policy never applies here, only the sandbox's ingress table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "audit/audit.h"
#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "parse/ingress_host.h"
#include "proxy/front.h"

#define TOKEN_HEADER		"X-Sandgate-Token"

int
ingress_worker_init(struct worker *w, const struct config *cfg)
{
	struct stat st;
	SSL_CTX *ctx;

	if (cfg->ingress_tls_cert == NULL)
		return 0;
	if (stat(cfg->ingress_tls_key, &st) == -1) {
		log_warn("ingress_tls key %s", cfg->ingress_tls_key);
		return -1;
	}
	if (st.st_mode & 077) {
		log_warnx("ingress_tls key %s is readable by group or others "
		    "(chmod 600 it)", cfg->ingress_tls_key);
		return -1;
	}
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		log_openssl("SSL_CTX_new");
		return -1;
	}
	w->tls_ingress_ctx = ctx;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(ctx, proxy_tls_alpn_cb, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->ingress_tls_cert) != 1) {
		log_openssl(cfg->ingress_tls_cert);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->ingress_tls_key,
	    SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
		log_openssl(cfg->ingress_tls_key);
		return -1;
	}
	return 0;
}

void
ingress_worker_free(struct worker *w)
{
	SSL_CTX_free(w->tls_ingress_ctx);
	w->tls_ingress_ctx = NULL;
}

/* A new ingress connection: TLS first when the listener has a certificate. */
void
ingress_start(struct exchange *s)
{
	struct bufferevent *f;
	SSL *ssl;

	/* Every row of this connection, a malformed request's too, says ingress. */
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "ingress");
	if (s->w->tls_ingress_ctx == NULL)
		return;
	if ((ssl = SSL_new(s->w->tls_ingress_ctx)) == NULL) {
		log_openssl("ingress SSL_new");
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	f = bufferevent_openssl_filter_new(s->w->base, s->c->cbev, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (f == NULL) {
		SSL_free(ssl);
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	/* From here the filter owns ssl and the socket bufferevent. */
	bufferevent_openssl_set_allow_dirty_shutdown(f, 1);
	s->c->cbev = f;
	s->c->intercepted = 1;	/* the client side is TLS (never the guest's) */
	bufferevent_setwatermark(f, EV_READ, 0, PROXY_READ_HWM >
	    s->p->cfg->max_header_bytes + 1024 ? PROXY_READ_HWM :
	    s->p->cfg->max_header_bytes + 1024);
	bufferevent_setcb(f, s->p->fe->client_read, NULL, client_event_cb, s);
	bufferevent_enable(f, EV_READ | EV_WRITE);
}

/* Deny (4xx) or error (5xx): one row, an answer, then close. */
static void
ingress_refuse(struct exchange *s, int status, enum sg_reason reason,
    const char *detail)
{
	exchange_log(s, reason_verdict(reason), status, reason);
	exchange_http_error(s, status, reason, detail);
}

/*
 * 302 to the same target without sg_token, and the token as a cookie. The
 * Location is a path on this host: a target that starts with two slashes
 * ("//evil.example/x", or "/\evil..." which browsers read alike) would be a
 * network-path reference to another host, so it gets a "/." in front
 * (the same path once dot segments are removed, and no authority).
 */
static void
ingress_redirect(struct exchange *s, const char *target, const char *tok,
    size_t toklen)
{
	struct evbuffer *out = bufferevent_get_output(s->c->cbev);
	const char *dot = "";

	if (target[0] == '/' && (target[1] == '/' || target[1] == '\\'))
		dot = "/.";

	exchange_log(s, VERDICT_ALLOW, 302, REASON_INGRESS_TOKEN_REDIRECT);
	evbuffer_add_printf(out, "HTTP/1.1 302 Found\r\n"
	    "Location: %s%s\r\n"
	    "Set-Cookie: sg_token=%.*s; Path=/; HttpOnly; SameSite=Lax%s\r\n"
	    "Cache-Control: no-store\r\n"
	    "Content-Length: 0\r\n"
	    "Connection: close\r\n\r\n",
	    dot, target[0] != '\0' ? target : "/", (int)toklen, tok,
	    s->c->intercepted ? "; Secure" : "");
	exchange_finish(s, CLOSE_DONE);
}

/*
 * A field an edge sets about the client and its request, which the guest's
 * app may trust: every X-Forwarded-* (X-Forwarded-User and -Email are a
 * login proxy's, -Port, -Prefix and -Ssl ProxyFix's and Rack's), its
 * underscore spelling (CGI-style servers read X_Forwarded_For as the
 * same), Forwarded, and the other client-address fields. The ingress
 * listener is the edge: the client's are dropped, never appended to.
 */
static int
header_is_forwarding(const struct http_header *h)
{
	static const char *const names[] = { "Forwarded", "X-Real-IP",
	    "True-Client-IP", "X-Client-IP", "X-Original-Forwarded-For",
	    "X-Cluster-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP" };
	const char *n = h->name.p;
	size_t i, len = h->name.len;

	if (len > 12 && (strncasecmp(n, "X-Forwarded-", 12) == 0 ||
	    strncasecmp(n, "X_Forwarded_", 12) == 0))
		return 1;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (http_header_is(h, names[i]))
			return 1;
	return 0;
}

/*
 * The head the guest gets: the target without sg_token, hop-by-hop and the
 * token's header and cookie removed, X-Forwarded-* set by us alone.
 */
static int
build_guest_head(struct exchange *s, const struct http_request *req,
    const char *target, const char *fhost, size_t fhostlen)
{
	struct evbuffer *h;
	const char *tok;
	char ip[NETADDR_STRLEN], *cookie, fr[48];
	size_t i, toklen;
	int n;

	/* One head per exchange: built once, never over another's. */
	if (s->fwd.head != NULL || (s->fwd.head = evbuffer_new()) == NULL)
		return -1;
	h = s->fwd.head;
	evbuffer_add_printf(h, "%.*s %s HTTP/1.%d\r\n", (int)req->method.len,
	    req->method.p, target, req->version_minor);
	if (req->form == HTTP_TARGET_ABSOLUTE)
		evbuffer_add_printf(h, "Host: %.*s\r\n", (int)fhostlen, fhost);
	for (i = 0; i < req->n_headers; i++) {
		const struct http_header *hd = &req->headers[i];

		if (!http_header_forwardable(hd, req->headers, req->n_headers) ||
		    http_header_is(hd, TOKEN_HEADER) || header_is_forwarding(hd))
			continue;
		if (req->form == HTTP_TARGET_ABSOLUTE && http_header_is(hd, "Host"))
			continue;
		if (http_header_is(hd, "Cookie")) {
			/* "a;b" comes out as "a; b": room for twice as much. */
			if ((cookie = malloc(2 * hd->value.len + 1)) == NULL)
				return -1;
			n = ingress_strip_cookie(hd->value.p, hd->value.len, cookie,
			    2 * hd->value.len + 1, &tok, &toklen);
			if (n > 0)
				evbuffer_add_printf(h, "Cookie: %s\r\n", cookie);
			free(cookie);
			if (n < 0)
				return -1;
			continue;
		}
		evbuffer_add_printf(h, "%.*s: %.*s\r\n", (int)hd->name.len,
		    hd->name.p, (int)hd->value.len, hd->value.p);
	}
	if (http_framing_header(req->framing, req->content_length, fr,
	    sizeof(fr)) < 0)
		return -1;
	evbuffer_add_printf(h, "%s", fr);
	if (req->upgrade) {
		const struct http_header *u = http_header_find(req->headers,
		    req->n_headers, "Upgrade");
		evbuffer_add_printf(h, "Connection: upgrade\r\nUpgrade: %.*s\r\n",
		    (int)u->value.len, u->value.p);
	} else if (req->version_minor == 0)
		evbuffer_add_printf(h, "Connection: close\r\n");
	netaddr_ntop(&s->c->client_addr, ip, sizeof(ip));
	evbuffer_add_printf(h, "X-Forwarded-For: %s\r\n"
	    "X-Forwarded-Proto: %s\r\n"
	    "X-Forwarded-Host: %.*s\r\n"
	    "Via: 1.%d sandgate\r\n\r\n", ip, s->c->intercepted ? "https" : "http",
	    (int)fhostlen, fhost, req->version_minor);
	return 0;
}

/* Where the token came with the request; the first place found decides. */
struct ingress_token {
	const char	*p;
	size_t		 len;
	int		 from_query;
};

static void
find_token(const struct http_request *req, const char *qtok, size_t qlen,
    struct ingress_token *t, char *cbuf, size_t cbuflen)
{
	const struct http_header *h;
	const char *tok;
	size_t i, toklen;

	memset(t, 0, sizeof(*t));
	if (qtok != NULL) {
		t->p = qtok;
		t->len = qlen;
		t->from_query = 1;
		return;
	}
	if ((h = http_header_find(req->headers, req->n_headers,
	    TOKEN_HEADER)) != NULL) {
		t->p = h->value.p;
		t->len = h->value.len;
		return;
	}
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (!http_header_is(h, "Cookie") || 2 * h->value.len >= cbuflen)
			continue;
		if (ingress_strip_cookie(h->value.p, h->value.len, cbuf, cbuflen,
		    &tok, &toklen) >= 0 && tok != NULL) {
			t->p = tok;	/* points into the request, not cbuf */
			t->len = toklen;
			return;
		}
	}
}

/* The authority the client named: absolute-form's, else the Host header. */
static int
request_authority(struct exchange *s, const struct http_request *req,
    char *buf, size_t len, const char **host, size_t *hostlen)
{
	int v6, n;

	if (req->form == HTTP_TARGET_ABSOLUTE) {
		v6 = memchr(req->host.p, ':', req->host.len) != NULL;
		n = snprintf(buf, len, "%s%.*s%s", v6 ? "[" : "",
		    (int)req->host.len, req->host.p, v6 ? "]" : "");
		if (req->has_port && n >= 0 && (size_t)n < len)
			n += snprintf(buf + n, len - (size_t)n, ":%u", req->port);
		if (n < 0 || (size_t)n >= len)
			return -1;
		*host = buf;
		*hostlen = (size_t)n;
		return 0;
	}
	if (!req->has_host)
		return -1;
	*host = req->host_header.p;
	*hostlen = req->host_header.len;
	return 0;
}

/* Connect to the guest, or go on over the kept-alive connection to it. */
static void
ingress_forward(struct exchange *s, const struct policy_ingress *ing,
    const struct http_request *req, int n)
{
	forward_prepare(s, req);
	evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	s->fwd.ip = ing->address;	/* the row names the guest even on 502 */
	if (req->upgrade) {
		/* A relayed WebSocket idles on its own clock. */
		s->idle_ms = s->p->cfg->ingress_upgrade_idle_ms;
		exchange_set_idle(s);
	}
	(void)exchange_set_addrs(s, &ing->address, 1);	/* inline */
	(void)upstream_take(s);	/* the guest's connection a request left */
	if (upstream_reusable(s)) {
		forward_start(s);
		return;
	}
	upstream_connect(s, forward_start);
}

/* What the decision says toward a sandbox, answered. */
static void
ingress_refused(struct exchange *s, enum sg_reason r, const char *id)
{
	char detail[256];

	switch (r) {
	case REASON_AUDIT_UNAVAILABLE:
		ingress_refuse(s, 503, r, "the audit log cannot be written");
		break;
	case REASON_INGRESS_PORT:
		snprintf(detail, sizeof(detail), "port %u of sandbox %s is not "
		    "published", s->target.port, id);
		ingress_refuse(s, 404, r, detail);
		break;
	case REASON_INGRESS_NOT_RUNNING:
		ingress_refuse(s, 503, r, "the sandbox is not running");
		break;
	case REASON_INGRESS_TOKEN_MISSING:
		ingress_refuse(s, 401, r, "this sandbox needs its ingress "
		    "token: header X-Sandgate-Token, or ?sg_token= once");
		break;
	case REASON_INGRESS_TOKEN_INVALID:
		ingress_refuse(s, 401, r, "ingress token not accepted");
		break;
	default:
		ingress_refuse(s, 404, REASON_INGRESS_UNKNOWN_SANDBOX, "no such "
		    "sandbox, or it publishes no ports");
		break;
	}
}

/* h[0..len) without a last ":digits" (a port; not inside an IPv6 "[...]"). */
static size_t
host_without_port(const char *h, size_t len)
{
	size_t i = len;

	while (i > 0 && h[i - 1] >= '0' && h[i - 1] <= '9')
		i--;
	if (i > 0 && h[i - 1] == ':' && memchr(h + i, ']', len - i) == NULL)
		return i - 1;
	return len;
}

static void
lower_ascii(char *s)
{
	for (; *s != '\0'; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s += 'a' - 'A';
}

void
ingress_request(struct exchange *s, const struct http_request *req, int n)
{
	struct policy_ingress ing;
	struct ingress_host ih;
	struct ingress_token tok;
	struct decide_env env;
	struct decide_q q;
	struct decision d;
	const char *fhost, *qtok;
	char abuf[300], detail[256], cbuf[2 * 8192], *target;
	size_t fhostlen, qlen;
	int r;

	/*
	 * The exchange is new (exchange_next): its rule "ingress", the current
	 * policy and registry, and no identity until this request gives one.
	 */
	/* The token leaves the target first: no row or log line shows it. */
	if ((target = exchange_alloc(s, req->path.len + 1)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	r = ingress_strip_query(req->path.p, req->path.len, target,
	    req->path.len + 1, &qtok, &qlen);
	if (r < 0) {	/* cannot happen: the output is never longer */
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	if (qtok == NULL) {
		/* Nothing to cut: the target goes on exactly as sent. */
		memcpy(target, req->path.p, req->path.len);
		target[req->path.len] = '\0';
	}
	/* The path as sent held the token: its bytes go before the target replaces it. */
	if (s->fwd.path != NULL)
		explicit_bzero(s->fwd.path, strlen(s->fwd.path));
	s->fwd.path = target;	/* both in the exchange's memory */

	if (req->form != HTTP_TARGET_ORIGIN && req->form != HTTP_TARGET_ABSOLUTE) {
		ingress_refuse(s, 400, REASON_BAD_REQUEST,
		    "not a request for a sandbox");
		return;
	}
	if (req->form == HTTP_TARGET_ABSOLUTE && !((req->scheme.len == 4 &&
	    strncasecmp(req->scheme.p, "http", 4) == 0) || (req->scheme.len == 5 &&
	    strncasecmp(req->scheme.p, "https", 5) == 0))) {
		ingress_refuse(s, 400, REASON_BAD_REQUEST, "only http and https");
		return;
	}
	if (request_authority(s, req, abuf, sizeof(abuf), &fhost, &fhostlen) == -1) {
		ingress_refuse(s, 400, REASON_BAD_REQUEST, "no Host");
		return;
	}
	r = ingress_host_parse(fhost, fhostlen, s->p->cfg->ingress_domain, &ih);
	if (r == INGRESS_HOST_BAD) {
		/* The row's host as any row's: lower-case, without its port. */
		log_escape_word(fhost, host_without_port(fhost, fhostlen),
		    s->target.host, sizeof(s->target.host));
		lower_ascii(s->target.host);
		ingress_refuse(s, 400, REASON_BAD_REQUEST, "malformed Host");
		return;
	}
	snprintf(s->target.host, sizeof(s->target.host), "%s", ih.name);
	s->target.port = ih.port;
	if (r != INGRESS_HOST_OK) {
		snprintf(detail, sizeof(detail), "the host is not PORT-ID.%s",
		    s->p->cfg->ingress_domain);
		ingress_refuse(s, 404, REASON_INGRESS_UNKNOWN_HOST, detail);
		return;
	}
	/* The one decision, toward a sandbox (core/decide.c). */
	find_token(req, qtok, qlen, &tok, cbuf, sizeof(cbuf));
	memset(&env, 0, sizeof(env));
	env.pol = s->pol;
	env.audit_refuses = audit_refuses(s->p->audit);
	env.keeper_up = 1;
	memset(&q, 0, sizeof(q));
	q.listener = DECIDE_INGRESS;
	q.target = &s->target;
	q.ingress_id = ih.id;
	q.token = tok.p;
	q.token_len = tok.len;
	q.token_malformed = tok.p != NULL &&
	    !ingress_token_syntax_ok(tok.p, tok.len);
	r = decide(&env, &q, &d);
	exchange_decided(s);
	s->verdict = d.v;
	if ((s->has_ident = d.has_ident))
		s->ident = d.ident;
	if (r != REASON_NONE) {
		ingress_refused(s, r, ih.id);
		return;
	}
	ing = d.ingress;
	if (tok.from_query && !ing.is_public) {
		/* Once: the token becomes a cookie, the URL loses it. */
		ingress_redirect(s, target, tok.p, tok.len);
		return;
	}
	if (build_guest_head(s, req, target, fhost, fhostlen) == -1) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	ingress_forward(s, &ing, req, n);
}
