/*
 * `sandgate ca init`: create the interception CA at the paths the config
 * names (ca.cert, ca.key) and the audit signing key beside it, check that
 * they load, and say where they went.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "audit/audit_query.h"
#include "core/config.h"
#include "sandgate.h"
#include "vault/ca.h"

static const char ca_usage[] =
    "usage: sandgate ca init [-c FILE] [--force]\n"
    "  Create the interception CA (ECDSA P-256, ten years) at the config's\n"
    "  ca.cert and ca.key (default ./certs/ca.crt, ./certs/ca.key; key mode\n"
    "  0600). Existing files are kept unless --force is given.\n"
    "  Also creates the audit signing key (Ed25519) at audit.signing_key\n"
    "  and audit.public_key (default: audit.key and audit.pub beside\n"
    "  ca.key) when it does not exist yet; --force never replaces it.\n"
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

/*
 * The audit signing key: created when absent, kept when present (a new
 * key would not verify the checkpoints the old one signed). 0 or 1.
 */
static int
audit_key_init(const struct config *cfg)
{
	struct ca_audit_key *k;
	uint8_t pub[32];
	char id[AUDIT_KEYID_HEX + 1] = "";
	const char *err;
	int existed = access(cfg->audit_signing_key, F_OK) == 0;

	if ((k = ca_audit_key_open(cfg->audit_signing_key,
	    cfg->audit_public_key, 1, &err)) == NULL)
		return cmd_error("ca init: audit signing key: %s", err);
	ca_audit_key_public(k, pub);
	(void)audit_key_id(pub, id);
	ca_audit_key_free(k);
	printf("%s audit signing key %s (mode 0600), public key %s, key id "
	    "%s\n", existed ? "kept" : "wrote", cfg->audit_signing_key,
	    cfg->audit_public_key, id);
	return 0;
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
	rc = audit_key_init(cfg);
done:
	config_free(cfg);
	return rc;
}

int
cmd_ca(int argc, char *argv[])
{
	struct cmd_args a;
	const char *opt, *val, *cfg_path = NULL;
	int force = 0, help = 0;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "force") == 0 || strcmp(opt, "f") == 0)
			force = 1;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0)
			help = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (help && (a.n_ops == 0 || strcmp(a.ops[0], "init") == 0)) {
		fputs(ca_usage, stdout);
		return 0;
	}
	if (a.n_ops == 0)
		return cmd_usage_error(ca_usage, "ca: no subcommand given");
	if (strcmp(a.ops[0], "init") != 0)
		return cmd_usage_error(ca_usage, "ca: unknown subcommand: %s "
		    "(sandgate help ca)", a.ops[0]);
	if (a.n_ops > 1)
		return cmd_usage_error(ca_usage, "ca init: unexpected argument: "
		    "%s", a.ops[1]);
	return ca_cmd_init(cfg_path, force);
}
