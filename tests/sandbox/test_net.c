/*
 * Unit test of the names sandbox_net.c gives a sandbox's network: they must
 * be the same in every version, since a restarted gateway looks for the
 * interfaces of the sandboxes that outlived it by these names.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sandbox/sandbox.h"

int
main(void)
{
	static const struct {
		const char *id, *veth;
	} t[] = {
		/* Written by the FNV-1a of every earlier version. */
		{ "a", "sge40c292c" },
		{ "x", "sgfd0c5087" },
		{ "agent-1", "sge35467a0" },
		{ "ci-runner", "sg157cc04e" },
	};
	struct sandbox_net n;
	char ns[64];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		sandbox_net_names(t[i].id, &n);
		CHECK_STR(n.veth_host, t[i].veth);
		snprintf(ns, sizeof(ns), "sandgate-%s", t[i].id);
		CHECK_STR(n.netns, ns);
		CHECK_STR(n.veth_guest, "eth0");
	}
	return check_summary();
}
