/*
 * The key keeper (docs/architecture.md "Processes"): the only process
 * that opens ca.key, vault.key, vault.db and the audit signing key. It
 * answers the network process over one socket (keeper_msg.h): leaf
 * certificates over the network process's own leaf key, audit checkpoint
 * signatures, and the values of the secrets a loaded policy binds --
 * never the others. src/daemon/ starts it in a process of its own; tests
 * and the worker fuzzer run keeper_serve() on a thread.
 *
 * The network side, keeper_client, is the gateway's only way to the keys:
 * a mutex-held request/answer with a deadline; a lost keeper makes
 * keeper_client_up() false until a new one is adopted.
 */
#ifndef SG_KEEPER_H
#define SG_KEEPER_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/x509.h>

struct config;
struct policy;
struct keeper;
struct keeper_client;
struct vault_snapshot;

/* ----------------------------------------------------------- keeper side */

/*
 * Open (creating on first start) the CA, the audit signing key and the
 * vault, and note which secrets pol's credentials name. NULL with a
 * one-line *errstr that names the file.
 */
struct keeper	*keeper_open(const struct config *cfg, const struct policy *pol,
		    const char **errstr);
/*
 * Answer requests on fd until the peer closes it (0) or sends something
 * malformed (-1, logged: the connection is over). Does not close fd.
 */
int		 keeper_serve(struct keeper *, int fd);
void		 keeper_free(struct keeper *);
/* Tell the peer why there will be no keeper (KEEPER_ERROR). */
void		 keeper_send_error(int fd, const char *msg);

/* ----------------------------------------------------------- network side */

/*
 * Take fd (a connected SOCK_SEQPACKET socket to a keeper), generate the
 * leaf key and say hello. NULL with *errstr: the keeper's own error when
 * it could not start (a corrupt vault.db...), else what went wrong.
 */
struct keeper_client *keeper_client_new(int fd, const char **errstr);
void		 keeper_client_free(struct keeper_client *);
/* 1 while a keeper answers; 0 after it was lost, until one is adopted. */
struct sg_hist;
int		 keeper_client_up(struct keeper_client *);
/* Its answered requests' round trips (core/stats.h); NULL without kc. */
struct sg_hist	*keeper_client_rtt(struct keeper_client *);
/*
 * A new keeper's socket (after a restart): hello again with the same leaf
 * key; the CA certificate must not have changed. 0, or -1 (fd closed).
 * The caller refreshes the secrets and then calls keeper_client_ready.
 */
int		 keeper_client_adopt(struct keeper_client *, int fd);
void		 keeper_client_ready(struct keeper_client *);
/* The keeper is gone (its monitor said so, or a request failed). */
void		 keeper_client_lost(struct keeper_client *, const char *why);

/* From the hello: the CA certificate (not up-ref'd), the leaf key, the audit public key. */
X509		*keeper_client_ca_cert(struct keeper_client *);
EVP_PKEY	*keeper_client_leaf_key(struct keeper_client *);
const uint8_t	*keeper_client_audit_pub(struct keeper_client *);

/* ca_remote_fn: a leaf for name over the leaf key; NULL when the keeper is down. */
X509		*keeper_client_sign_leaf(void *kc, const char *name, int is_ip,
		    time_t *not_after);
/* audit_signer.sign: 0 or -1. */
int		 keeper_client_sign_audit(void *kc, const uint8_t *msg,
		    size_t len, uint8_t sig[64]);
/*
 * The keeper re-reads the policies (after a reload here): 0, or -1.
 */
int		 keeper_client_policy(struct keeper_client *);
/*
 * A snapshot of the values of names (vault_snapshot_build, wiped memory).
 * A name the keeper refuses (no loaded policy binds it) or the vault lacks
 * is left out; status[i] gets each name's enum keeper_status. NULL when
 * the keeper could not be asked.
 */
struct vault_snapshot *keeper_client_secrets(struct keeper_client *,
		    const char *const *names, size_t n, int *status);
/*
 * Store rt[0..len) as the refresh_token of vault entry name (an oauth2
 * credential's, or the keeper refuses). The answer's enum keeper_status,
 * or -1 when the keeper could not be asked.
 */
int		 keeper_client_put_refresh(struct keeper_client *,
		    const char *name, const char *rt, size_t len);
/* Something that changes whenever vault.db does; -1 when down. */
int		 keeper_client_vault_stamp(struct keeper_client *, uint64_t *);

#endif
