/*
 * `sandgate ca init`: create the interception CA at the paths the config
 * names (ca.cert, ca.key), check that it loads, and say where it went.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "core/config.h"
#include "sandgate.h"
#include "vault/ca.h"

static const char ca_usage[] =
    "usage: sandgate ca init [-c FILE] [--force]\n"
    "  Create the interception CA (ECDSA P-256, ten years) at the config's\n"
    "  ca.cert and ca.key (default ./certs/ca.crt, ./certs/ca.key; key mode\n"
    "  0600). Existing files are kept unless --force is given.\n"
    "  -c FILE   config file (default: ./sandgate.yaml,\n"
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n"
    "  --force   replace an existing CA (clients must trust the new one)\n";

static void
print_fingerprint(X509 *x)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int i, len;

	if (!X509_digest(x, EVP_sha256(), md, &len))
		return;
	fputs("SHA-256 fingerprint: ", stdout);
	for (i = 0; i < len; i++)
		printf("%02X%s", md[i], i + 1 < len ? ":" : "\n");
}

static int
ca_cmd_init(const char *cfg_path, int force)
{
	struct config *cfg;
	struct ca *ca;
	const char *err;
	int rc = 1;

	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (ca_init(cfg->ca_cert, cfg->ca_key, force, &err) == -1) {
		cmd_error("ca init: %s", err);
		goto done;
	}
	/* Load it back: what serve will accept is what we promise here. */
	if ((ca = ca_load(cfg->ca_cert, cfg->ca_key, &err)) == NULL) {
		cmd_error("ca init: the new CA does not load: %s", err);
		goto done;
	}
	printf("wrote CA certificate %s\n", cfg->ca_cert);
	printf("wrote CA key %s (mode 0600)\n", cfg->ca_key);
	print_fingerprint(ca_cert(ca));
	printf("install %s in the trust store of every intercepted client "
	    "(see docs/tls.md)\n", cfg->ca_cert);
	ca_free(ca);
	rc = 0;
done:
	config_free(cfg);
	return rc;
}

int
cmd_ca(int argc, char *argv[])
{
	struct cmd_args a;
	const char *opt, *val, *cfg_path = NULL;
	int force = 0;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "force") == 0 || strcmp(opt, "f") == 0)
			force = 1;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(ca_usage, stdout);
			return 0;
		} else
			return cmd_usage_error(ca_usage, "ca: bad option: %s",
			    a.bad ? a.bad : opt);
	}
	if (a.n_ops == 0)
		return cmd_usage_error(ca_usage, "ca: no subcommand given");
	if (strcmp(a.ops[0], "init") != 0)
		return cmd_usage_error(ca_usage, "ca: unknown subcommand: %s",
		    a.ops[0]);
	if (a.n_ops > 1)
		return cmd_usage_error(ca_usage, "ca init: unexpected argument: "
		    "%s", a.ops[1]);
	return ca_cmd_init(cfg_path, force);
}
