/*
 * The oauth2: map of a credential of kind oauth2 (docs/credentials.md,
 * "OAuth 2.0 credentials"): where the gateway gets its tokens and how it
 * asks. Parsed here, errors at their line; policy_load.c calls in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/policy.h"
#include "core/yaml_tree.h"

#define OA_URL_MAX		2048
#define OA_SCOPE_MAX		512
#define OA_BEFORE_MAX_MS	(3600u * 1000u)	/* refresh_before: at most 1h */

void
policy_oauth2_free(struct policy_oauth2 *o)
{
	if (o == NULL)
		return;
	free(o->token_url);
	free(o->host);
	free(o->path);
	free(o->scope);
	free(o->access_name);
	free(o->was_name);
	free(o->refresh_name);
	free(o->client_name);
	free(o->basic_name);
	free(o);
}

/* Bytes a path (and query) may hold as they are in a request line. */
static int
oa_path_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f ||
		    *s == '#')
			return 0;
	return 1;
}

/* https://host[:port][/path[?query]]: 0 and o filled, or -1 with *why. */
static int
oa_url(struct policy_oauth2 *o, const char *url, const char **why)
{
	struct policy_target t;
	const char *a, *end, *colon, *hs, *he;
	unsigned long port = 443;
	char *ep;

	if (strncasecmp(url, "https://", 8) != 0) {
		*why = "must be an https:// URL (the token travels in it)";
		return -1;
	}
	a = url + 8;
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a)) != NULL) {
		*why = "no user:password@ in the URL (client_id and "
		    "client_secret are in the vault entry)";
		return -1;
	}
	hs = a;
	he = end;
	if (*a == '[') {
		if ((he = memchr(a, ']', (size_t)(end - a))) == NULL) {
			*why = "an IPv6 address without its ]";
			return -1;
		}
		hs = a + 1;
		colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
		if (colon == NULL && he + 1 != end) {
			*why = "bytes after the ]";
			return -1;
		}
	} else if ((colon = memchr(a, ':', (size_t)(end - a))) != NULL)
		he = colon;
	if (colon != NULL) {
		port = strtoul(colon + 1, &ep, 10);
		if (ep != end || colon + 1 == end || port == 0 ||
		    port > 65535) {
			*why = "the port is not a number 1-65535";
			return -1;
		}
	}
	if (he == hs || policy_target_init(&t, hs, (size_t)(he - hs),
	    (uint16_t)port) == -1) {
		*why = "not a valid host name or address";
		return -1;
	}
	if (*end == '#' || !oa_path_ok(end)) {
		*why = "the path has a fragment, spaces or control bytes";
		return -1;
	}
	o->host_is_ip = t.is_ip;
	o->port = (uint16_t)port;
	if ((o->host = strdup(t.host)) == NULL ||
	    (o->path = *end == '\0' ? strdup("/") : *end == '?' ?
	    (char *)malloc(strlen(end) + 2) : strdup(end)) == NULL ||
	    (o->token_url = strdup(url)) == NULL) {
		*why = "out of memory";
		return -1;
	}
	if (*end == '?')
		snprintf(o->path, strlen(end) + 2, "/%s", end);
	return 0;
}

static int
oa_scope_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f ||
		    *s == '"' || *s == '\\')
			return 0;
	return 1;
}

struct policy_oauth2 *
policy_oauth2_parse(struct ycheck *yc, const struct ynode *n)
{
	struct policy_oauth2 *o;
	const struct ynode *c;
	const char *s, *why;
	uint64_t ms;
	int bad = 0;

	if (ycheck_is(yc, n, YNODE_MAP, "oauth2") == -1)
		return NULL;
	if ((o = calloc(1, sizeof(*o))) == NULL) {
		ycheck_err(yc, n, "out of memory");
		return NULL;
	}
	o->refresh_before_ms = 60000;
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "token_url") == 0) {
			if (ycheck_str(yc, c, "oauth2: token_url", OA_URL_MAX,
			    &s) == -1)
				bad = 1;
			else if (oa_url(o, s, &why) == -1) {
				ycheck_err(yc, c, "oauth2: token_url: %s", why);
				bad = 1;
			}
		} else if (strcmp(s, "grant") == 0) {
			if (ycheck_str(yc, c, "oauth2: grant", 32, &s) == -1)
				bad = 1;
			else if (strcmp(s, "refresh_token") == 0)
				o->grant = POLICY_OAUTH2_REFRESH_TOKEN;
			else if (strcmp(s, "client_credentials") == 0)
				o->grant = POLICY_OAUTH2_CLIENT_CREDENTIALS;
			else {
				ycheck_err(yc, c, "oauth2: grant: %s is not "
				    "one of refresh_token|client_credentials",
				    s);
				bad = 1;
			}
		} else if (strcmp(s, "scope") == 0) {
			if (ycheck_str(yc, c, "oauth2: scope", OA_SCOPE_MAX,
			    &s) == -1)
				bad = 1;
			else if (!oa_scope_ok(s)) {
				ycheck_err(yc, c, "oauth2: scope: printable "
				    "ASCII without \" or \\ (RFC 6749 3.3)");
				bad = 1;
			} else if (o->scope == NULL &&
			    (o->scope = strdup(s)) == NULL)
				bad = 1;
		} else if (strcmp(s, "client_auth") == 0) {
			if (ycheck_str(yc, c, "oauth2: client_auth", 32,
			    &s) == -1)
				bad = 1;
			else if (strcmp(s, "basic") == 0)
				o->client_auth_body = 0;
			else if (strcmp(s, "body") == 0)
				o->client_auth_body = 1;
			else {
				ycheck_err(yc, c, "oauth2: client_auth: %s is "
				    "not one of basic|body", s);
				bad = 1;
			}
		} else if (strcmp(s, "refresh_before") == 0) {
			if (ycheck_str(yc, c, "oauth2: refresh_before", 32,
			    &s) == -1)
				bad = 1;
			else if (config_parse_duration_ms(s, &ms) == -1 ||
			    ms > OA_BEFORE_MAX_MS) {
				ycheck_err(yc, c, "oauth2: refresh_before: a "
				    "duration from 0s to 1h (e.g. 60s)");
				bad = 1;
			} else
				o->refresh_before_ms = ms;
		} else {
			ycheck_unknown_of(yc, c, "oauth2", "token_url|grant|"
			    "scope|client_auth|refresh_before");
			bad = 1;
		}
	}
	if (ynode_map_get(n, "token_url") == NULL) {
		ycheck_err(yc, n, "oauth2: token_url is required");
		bad = 1;
	}
	if (bad) {
		policy_oauth2_free(o);
		return NULL;
	}
	return o;
}

int
policy_oauth2_names(struct policy_oauth2 *o, const char *secret)
{
	size_t n = strlen(secret) + sizeof("#refresh");

	if ((o->access_name = malloc(n)) == NULL ||
	    (o->was_name = malloc(n)) == NULL ||
	    (o->refresh_name = malloc(n)) == NULL ||
	    (o->client_name = malloc(n)) == NULL ||
	    (o->basic_name = malloc(n)) == NULL)
		return -1;
	snprintf(o->access_name, n, "%s#access", secret);
	snprintf(o->was_name, n, "%s#prev", secret);
	snprintf(o->refresh_name, n, "%s#refresh", secret);
	snprintf(o->client_name, n, "%s#client", secret);
	snprintf(o->basic_name, n, "%s#basic", secret);
	return 0;
}
