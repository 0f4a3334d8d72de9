/*
 * libFuzzer target for policy replay's judgement of one audit row
 * (core/policy_replay.c): rows hold what sandboxes sent (host, path,
 * method) and whatever an edited audit.db or fleet store holds elsewhere
 * (kind, decision, rule, reason, country). Oracles that abort:
 *
 * - the same row gives the same judgement (nothing kept between rows);
 * - a skipped or undecidable row has a why and a detail and no decision;
 * - a decided row has a decision (allow, report or deny), a reason and a
 *   rule, and its class agrees with the recorded and the new decision.
 *
 * Input: byte 0 the kind, byte 1 flags (which fields are NULL, the
 * candidate), bytes 2-3 the port, then NUL-separated fields: sandbox,
 * host, method, path, decision, rule, reason, country.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/policy.h"
#include "core/policy_replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define COMMON \
    "sandboxes:\n" \
    "  - id: box\n" \
    "    policy: p\n" \
    "    source: [127.0.0.1/32]\n" \
    "credentials:\n" \
    "  - name: k\n" \
    "    secret: k\n" \
    "    hosts: [api.example.com]\n"

static const char cur_text[] = COMMON
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    allow_private: [10.0.0.0/8]\n"
    "    allow:\n"
    "      - host: \"*.example.com\"\n"
    "      - host: o.example.org\n"
    "        opaque: true\n"
    "      - cidr: 10.0.0.0/8\n"
    "  - name: q\n"
    "    mode: report\n"
    "    allow:\n"
    "      - host: a.example.org\n";

static const char cand_text[] = COMMON
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    countries: { deny: [KP] }\n"
    "    allow:\n"
    "      - host: \"*.example.com\"\n"
    "        tls: passthrough\n"
    "        methods: [GET]\n"
    "        paths: [\"/v1/*\"]\n"
    "      - host: o.example.org\n"
    "      - cidr: 10.1.0.0/16\n"
    "    deny:\n"
    "      - host: bad.example.com\n"
    "  - name: q\n"
    "    allow:\n"
    "      - host: b.example.org\n";

static struct policy *cur, *cand;

static struct policy *
load(const char *text, size_t len)
{
	char path[64], *paths[1];
	struct policy *p;
	struct diag d;
	int fd;

	if ((fd = memfd_create("fuzz_replay.yaml", MFD_CLOEXEC)) == -1 ||
	    write(fd, text, len) != (ssize_t)len)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	paths[0] = path;
	diag_init(&d);
	if ((p = policy_load_paths(paths, 1, &d)) == NULL) {
		diag_print(&d, stderr);
		abort();
	}
	diag_free(&d);
	close(fd);
	return p;
}

static const char *const kinds[] = { "http", "connect", "socks5", "dns",
	"transparent", "ingress", "admin", "vault" };

#define NFIELDS	8

static void
check(const struct replay_row *row, const struct replay_result *r)
{
	int old_pass;

	switch (r->cls) {
	case REPLAY_SKIP:
	case REPLAY_UNDECIDABLE:
		if (r->why == NULL || r->detail == NULL || r->now != NULL)
			abort();
		return;
	case REPLAY_SAME:
	case REPLAY_ALLOW_TO_DENY:
	case REPLAY_DENY_TO_ALLOW:
		break;
	default:
		abort();
	}
	if (r->now == NULL || r->reason == NULL || r->rule[0] == '\0' ||
	    (strcmp(r->now, "allow") != 0 && strcmp(r->now, "report") != 0 &&
	    strcmp(r->now, "deny") != 0))
		abort();
	old_pass = strcmp(row->decision, "deny") != 0;
	if ((r->cls == REPLAY_SAME) != (old_pass == (strcmp(r->now, "deny") !=
	    0)))
		abort();
	if (r->cls == REPLAY_ALLOW_TO_DENY && (!old_pass ||
	    strcmp(r->now, "deny") != 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct replay_row row;
	struct replay_result a, b;
	char *copy, *f[NFIELDS], *p;
	size_t i;

	if (cur == NULL) {
		cur = load(cur_text, sizeof(cur_text) - 1);
		cand = load(cand_text, sizeof(cand_text) - 1);
	}
	if (size < 4 || (copy = malloc(size + NFIELDS + 1)) == NULL)
		return 0;
	memcpy(copy, data + 4, size - 4);
	memset(copy + size - 4, 0, NFIELDS + 5);
	for (p = copy, i = 0; i < NFIELDS; i++) {
		f[i] = p;
		p += strlen(p) + 1;
	}
	memset(&row, 0, sizeof(row));
	row.kind = kinds[data[0] % 8];
	row.sandbox = data[1] & 1 ? NULL : f[0];
	row.host = data[1] & 2 ? NULL : f[1];
	row.method = data[1] & 4 ? NULL : f[2];
	row.path = data[1] & 8 ? NULL : f[3];
	row.decision = f[4];
	row.rule = data[1] & 16 ? NULL : f[5];
	row.reason = f[6];
	row.country = data[1] & 32 ? NULL : f[7];
	row.port = data[1] & 64 ? -1 : (int)(data[2] << 8 | data[3]);
	row.asn = data[1] & 32 ? -1 : data[3];
	policy_replay_row(data[1] & 128 ? cur : cand, cur, &row, &a);
	policy_replay_row(data[1] & 128 ? cur : cand, cur, &row, &b);
	if (a.cls != b.cls || (a.why == NULL) != (b.why == NULL) ||
	    (a.why != NULL && strcmp(a.why, b.why) != 0) ||
	    (a.now == NULL) != (b.now == NULL) ||
	    (a.now != NULL && strcmp(a.now, b.now) != 0) ||
	    strcmp(a.rule, b.rule) != 0)
		abort();
	check(&row, &a);
	free(copy);
	return 0;
}
