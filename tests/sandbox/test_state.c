/*
 * Unit tests of state.db (src/sandbox/sandbox_state.c): rows written,
 * read back field by field, updated, listed in creation order, deleted;
 * a second row with one id refused; the file private to its owner.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "sandbox/sandbox.h"

static void
fill(struct sandbox_row *r, const char *id, int64_t created)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->policy, sizeof(r->policy), "web");
	snprintf(r->runtime, sizeof(r->runtime), "crun");
	snprintf(r->mode, sizeof(r->mode), "create");
	snprintf(r->state, sizeof(r->state), "creating");
	r->created = created;
	r->expires = created + 3600;
	r->owner_pid = 4242;
	r->owner_start = 123456789012ull;
	r->publish[0] = 8000;
	r->publish[1] = 65535;
	r->publish[2] = 1;
	r->n_publish = 3;
	snprintf(r->token, sizeof(r->token), "%040d", 7);
	snprintf(r->admin, sizeof(r->admin), "/run/x/admin.sock");
}

/*
 * Launchers start side by side on a new state.db: every one of them must
 * open it (journal mode and schema race; SQLite may answer busy at once).
 */
static void
test_concurrent_open(const char *dir)
{
	char path[96];
	int round, i, status, ok, go[2];
	pid_t kids[8];

	for (round = 0; round < 10; round++) {
		snprintf(path, sizeof(path), "%s/race-%d.db", dir, round);
		CHECK(pipe(go) == 0);
		for (i = 0; i < 8; i++) {
			if ((kids[i] = fork()) == 0) {
				struct sandbox_state *st;
				const char *err = NULL;
				char c;

				close(go[1]);
				(void)read(go[0], &c, 1);	/* all start together */
				st = sandbox_state_open(path, &err);
				if (st == NULL)
					_exit(1);
				sandbox_state_close(st);
				_exit(0);
			}
		}
		close(go[0]);
		close(go[1]);	/* EOF: go */
		for (i = 0, ok = 0; i < 8; i++)
			if (waitpid(kids[i], &status, 0) == kids[i] &&
			    WIFEXITED(status) && WEXITSTATUS(status) == 0)
				ok++;
		CHECK_MSG(ok == 8, "round %d: %d of 8 opened %s", round, ok, path);
		for (i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/race-%d.db%s", dir, round,
			    (const char *[]){ "", "-wal", "-shm" }[i]);
			(void)unlink(path);
		}
	}
}

int
main(void)
{
	char dir[] = "/tmp/sg-state-XXXXXX", path[64];
	struct sandbox_state *st;
	struct sandbox_row a, b, got, *rows;
	struct stat sb;
	const char *err = NULL;
	size_t n;

	CHECK(mkdtemp(dir) != NULL);
	test_concurrent_open(dir);
	snprintf(path, sizeof(path), "%s/state.db", dir);
	st = sandbox_state_open(path, &err);
	CHECK(st != NULL);
	if (st == NULL)
		return check_summary();
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);

	fill(&a, "sb-b", 200);
	fill(&b, "sb-a", 100);
	b.n_publish = 0;
	b.is_public = 1;
	CHECK(sandbox_state_insert(st, &a) == 0);
	CHECK(sandbox_state_insert(st, &b) == 0);
	errno = 0;
	CHECK(sandbox_state_insert(st, &a) == -1 && errno == EEXIST);

	CHECK(sandbox_state_get(st, "sb-b", &got) == 1);
	CHECK_STR(got.id, "sb-b");
	CHECK_STR(got.policy, "web");
	CHECK_STR(got.runtime, "crun");
	CHECK_STR(got.mode, "create");
	CHECK_STR(got.state, "creating");
	CHECK(got.created == 200 && got.expires == 3800);
	CHECK(got.owner_pid == 4242 && got.owner_start == 123456789012ull);
	CHECK(got.n_publish == 3 && got.publish[0] == 8000 &&
	    got.publish[1] == 65535 && got.publish[2] == 1);
	CHECK(got.is_public == 0);
	CHECK_STR(got.token, a.token);
	CHECK_STR(got.admin, "/run/x/admin.sock");
	CHECK_STR(got.guest, "");
	CHECK(sandbox_state_get(st, "sb-none", &got) == 0);

	CHECK(sandbox_state_update(st, "sb-b", "running", "198.18.0.2") == 0);
	CHECK(sandbox_state_update(st, "sb-b", "exited", NULL) == 0);
	CHECK(sandbox_state_get(st, "sb-b", &got) == 1);
	CHECK_STR(got.state, "exited");
	CHECK_STR(got.guest, "198.18.0.2");

	CHECK(sandbox_state_list(st, &rows, &n) == 0);
	CHECK(n == 2);
	if (n == 2) {
		CHECK_STR(rows[0].id, "sb-a");	/* created first */
		CHECK(rows[0].n_publish == 0 && rows[0].is_public == 1);
		CHECK_STR(rows[1].id, "sb-b");
	}
	free(rows);

	CHECK(sandbox_state_delete(st, "sb-a") == 0);
	CHECK(sandbox_state_get(st, "sb-a", &got) == 0);
	CHECK(sandbox_state_list(st, &rows, &n) == 0 && n == 1);
	free(rows);
	sandbox_state_close(st);

	/* reopened: the rows are on disk */
	st = sandbox_state_open(path, &err);
	CHECK(st != NULL && sandbox_state_get(st, "sb-b", &got) == 1);
	sandbox_state_close(st);

	snprintf(path, sizeof(path), "%s/no/such/dir/state.db", dir);
	CHECK(sandbox_state_open(path, &err) == NULL && err != NULL);
	for (n = 0; n < 3; n++) {
		snprintf(path, sizeof(path), "%s/state.db%s", dir,
		    (const char *[]){ "", "-wal", "-shm" }[n]);
		(void)unlink(path);
	}
	CHECK(rmdir(dir) == 0);
	return check_summary();
}
