/*
 * `sandgate top`: a live console of the gateway (ncurses): its sandboxes
 * with their rates and totals, a feed of the newest decisions, filters and
 * one row's full detail; or, with --once, one snapshot as text.
 */
#include <ctype.h>
#include <curses.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd_top.h"
#include "sandgate.h"

#define TOP_USAGE \
    "usage: sandgate top [-c FILE] [--interval SECONDS] [--once]\n" \
    "                    [--sandbox TEXT] [--decision D] [--host TEXT]\n" \
    "  A live console: the sandboxes (requests/s and denials/s over the\n" \
    "  last interval, totals since top started), the gateway's connections\n" \
    "  and open tunnels, and the newest decisions of the audit log.\n" \
    "  --interval: seconds between reads (default 1, 0.2 to 3600).\n" \
    "  --once: wait one interval and print one snapshot as text (needed\n" \
    "  when stdout is not a terminal). --sandbox, --decision (allow, deny,\n" \
    "  report, error), --host: the feed's first filters.\n" \
    "  Keys: s sandbox filter, d next decision filter, h host filter,\n" \
    "  c clear filters, p pause, Up/Down select a row, Enter its detail,\n" \
    "  Esc close the detail, q quit; with questions of mode: ask pending\n" \
    "  (listed above the table), a approves the oldest, x denies it.\n"

#define KEY_ESC		27
#define UI_TICK_MS	100

struct ui {
	struct top		*t;
	struct top_filter	 f;
	double			 interval;
	int			 paused;
	int			 detail;	/* showing sel_id's fields */
	int64_t			 sel_id;	/* 0: no row selected */
	size_t			 off;		/* first feed row shown */
	/* the feed as shown: indexes into t->feed, newest first */
	size_t			 idx[TOP_FEED_MAX];
	size_t			 n_idx;
};

static volatile sig_atomic_t top_stop;

static void
top_stop_cb(int sig)
{
	(void)sig;
	top_stop = 1;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Text at (y, x), cut at the screen's edge. Everything drawn is escaped
 * already; a byte outside printable ASCII still becomes '?' here.
 */
static void
put(int y, int x, const char *s)
{
	char buf[1024];
	int i, n;

	if (y < 0 || y >= LINES || x >= COLS)
		return;
	n = COLS - x;
	if (n > (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 1;
	for (i = 0; i < n && s[i] != '\0'; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	mvaddstr(y, x, buf);
}

static void
feed_index(struct ui *u)
{
	struct top *t = u->t;
	size_t i;
	int found = 0;

	u->n_idx = 0;
	for (i = t->n_feed; i > 0; i--)
		if (top_row_matches(t->feed[i - 1], &u->f)) {
			if (t->feed[i - 1]->id == u->sel_id)
				found = 1;
			u->idx[u->n_idx++] = i - 1;
		}
	if (!found) {
		u->sel_id = 0;
		u->detail = 0;
	}
}

static size_t
sel_pos(const struct ui *u)
{
	size_t i;

	for (i = 0; i < u->n_idx; i++)
		if (u->t->feed[u->idx[i]]->id == u->sel_id)
			return i;
	return 0;
}

static const struct top_row *
sel_row(const struct ui *u)
{
	if (u->sel_id == 0 || u->n_idx == 0)
		return NULL;
	return u->t->feed[u->idx[sel_pos(u)]];
}

static void
draw_filters(const struct ui *u, int y)
{
	char line[512];

	snprintf(line, sizeof(line), "filter: sandbox=%s decision=%s host=%s"
	    "%s   [s]andbox [d]ecision [h]ost [c]lear [p]ause Up/Down Enter "
	    "[q]uit", u->f.sandbox[0] ? u->f.sandbox : "*",
	    top_decision_names[u->f.decision], u->f.host[0] ? u->f.host : "*",
	    u->paused ? "  PAUSED" : "");
	put(y, 0, line);
}

static void
draw_feed(struct ui *u, int y, int rows)
{
	char line[4096];
	size_t i, pos;

	attron(A_BOLD);
	put(y++, 0, "TIME         SANDBOX        DECIS. KIND        "
	    "HOST:PORT                        METHOD PATH  REASON");
	attroff(A_BOLD);
	rows--;
	if (rows <= 0)
		return;
	if (u->sel_id == 0)
		u->off = 0;
	else {
		pos = sel_pos(u);
		if (pos < u->off)
			u->off = pos;
		else if (pos >= u->off + (size_t)rows)
			u->off = pos - (size_t)rows + 1;
	}
	for (i = u->off; i < u->n_idx && (int)(i - u->off) < rows; i++) {
		const struct top_row *r = u->t->feed[u->idx[i]];

		top_feed_line(r, line, sizeof(line));
		if (r->id == u->sel_id)
			attron(A_REVERSE);
		put(y + (int)(i - u->off), 0, line);
		if (r->id == u->sel_id)
			attroff(A_REVERSE);
	}
	if (u->n_idx == 0)
		put(y, 0, "(no decisions match)");
}

static void
draw_main(struct ui *u)
{
	struct top *t = u->t;
	char line[4096];
	int y = 0, sb_rows, i;

	top_header_line(t, line, sizeof(line));
	attron(A_REVERSE);
	put(y++, 0, line);
	attroff(A_REVERSE);
	if (!t->gw.admin_ok || !t->gw.metrics_ok) {
		snprintf(line, sizeof(line), "%s%s%s%s",
		    t->gw.admin_ok ? "" : "admin API: ",
		    t->gw.admin_ok ? "" : t->gw.admin_msg,
		    t->gw.metrics_ok ? "" : "  metrics: ",
		    t->gw.metrics_ok ? "" : t->gw.metrics_msg);
		put(y++, 0, line);
	}
	draw_filters(u, y++);
	/* mode: ask: the oldest pending questions; a approves, x denies the first */
	if (t->n_q_all > 0) {
		snprintf(line, sizeof(line), "pending questions: %zu   "
		    "(a: approve the first, x: deny it)", t->n_q_all);
		attron(A_BOLD);
		put(++y, 0, line);
		attroff(A_BOLD);
		y++;
		for (i = 0; i < (int)t->n_q && i < 5; i++) {
			top_question_line(&t->q[i], line, sizeof(line));
			put(y++, 0, line);
		}
	}
	/* the table takes up to a third of what is left */
	sb_rows = (LINES - y - 2) / 3;
	if (sb_rows < 1)
		sb_rows = 1;
	top_table_title(line, sizeof(line));
	attron(A_BOLD);
	put(++y, 0, line);
	attroff(A_BOLD);
	y++;
	for (i = 0; i < (int)t->n_sb && i < sb_rows; i++) {
		if (u->f.sandbox[0] != '\0' &&
		    strcasestr(t->sb[i].name, u->f.sandbox) == NULL)
			continue;
		top_table_line(&t->sb[i], line, sizeof(line));
		put(y++, 0, line);
	}
	if (t->n_sb == 0)
		put(y++, 0, "(no traffic since top started)");
	y++;
	draw_feed(u, y, LINES - y);
}

static void
draw_detail(struct ui *u)
{
	const struct top_row *r = sel_row(u);
	char head[64];
	int i, y = 2, w = COLS - 16;
	size_t len, o;

	if (r == NULL) {
		u->detail = 0;
		return;
	}
	attron(A_REVERSE);
	put(0, 0, "audit row: every field   (Esc or q: back)");
	attroff(A_REVERSE);
	if (w < 8)
		w = 8;
	for (i = 0; i < AUDIT_NCOLS && y < LINES; i++) {
		const char *v = r->v[i] != NULL ? r->v[i] : "(null)";

		snprintf(head, sizeof(head), "%-13s", audit_col_names[i]);
		attron(A_BOLD);
		put(y, 0, head);
		attroff(A_BOLD);
		/* long values (a path, a hash) wrap under their column */
		len = strlen(v);
		for (o = 0; y < LINES && (o == 0 || o < len); o += (size_t)w) {
			char chunk[1024];
			size_t n = len - o < (size_t)w ? len - o : (size_t)w;

			if (n >= sizeof(chunk))
				n = sizeof(chunk) - 1;
			memcpy(chunk, v + o, n);
			chunk[n] = '\0';
			put(y++, 15, chunk);
		}
	}
}

static void
draw(struct ui *u)
{
	char msg[64];

	erase();
	if (LINES < 6 || COLS < 40) {
		snprintf(msg, sizeof(msg), "terminal too small (%dx%d)", COLS,
		    LINES);
		put(0, 0, msg);
	} else if (u->detail)
		draw_detail(u);
	else
		draw_main(u);
	refresh();
}

/* Read a line into buf at the bottom; Esc leaves buf as it was. */
static void
prompt(struct ui *u, const char *what, char *buf, size_t len)
{
	char text[128], line[256];
	size_t n = 0;
	int ch;

	text[0] = '\0';
	for (;;) {
		draw(u);
		snprintf(line, sizeof(line), "%s (Enter: apply, Esc: cancel): %s",
		    what, text);
		move(LINES - 1, 0);
		clrtoeol();
		attron(A_REVERSE);
		put(LINES - 1, 0, line);
		attroff(A_REVERSE);
		refresh();
		if (top_stop)
			return;
		ch = getch();
		if (ch == ERR || ch == KEY_RESIZE)
			continue;
		if (ch == KEY_ESC)
			return;
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER)
			break;
		if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n > 0)
			text[--n] = '\0';
		else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof(text) &&
		    n + 1 < len) {
			text[n++] = (char)ch;
			text[n] = '\0';
		}
	}
	snprintf(buf, len, "%s", text);
}

static void
move_sel(struct ui *u, int delta)
{
	long pos;

	if (u->n_idx == 0)
		return;
	if (u->sel_id == 0) {
		u->sel_id = u->t->feed[u->idx[0]]->id;
		return;
	}
	pos = (long)sel_pos(u) + delta;
	if (pos < 0)
		pos = 0;
	if (pos >= (long)u->n_idx)
		pos = (long)u->n_idx - 1;
	u->sel_id = u->t->feed[u->idx[pos]]->id;
}

/* One key; 1 to quit. */
static int
key(struct ui *u, int ch)
{
	if (u->detail) {
		if (ch == KEY_ESC || ch == 'q' || ch == '\n' || ch == '\r' ||
		    ch == KEY_ENTER || ch == KEY_LEFT)
			u->detail = 0;
		return 0;
	}
	switch (ch) {
	case 'q':
	case 'Q':
		return 1;
	case KEY_ESC:
		u->sel_id = 0;
		break;
	case 's':
		prompt(u, "sandbox contains", u->f.sandbox,
		    sizeof(u->f.sandbox));
		break;
	case 'h':
		prompt(u, "host contains", u->f.host, sizeof(u->f.host));
		break;
	case 'd':
		u->f.decision = (u->f.decision + 1) % TOP_DEC_N;
		break;
	case 'c':
		memset(&u->f, 0, sizeof(u->f));
		break;
	case 'p':
		u->paused = !u->paused;
		break;
	case 'a':
	case 'x':
		/* The oldest pending question: answered, then listed again. */
		if (u->t->n_q > 0 && top_answer(u->t, u->t->q[0].id,
		    ch == 'a') == 0)
			top_poll_gateway(u->t);
		break;
	case KEY_DOWN:
	case 'j':
		move_sel(u, 1);
		break;
	case KEY_UP:
	case 'k':
		move_sel(u, -1);
		break;
	case KEY_NPAGE:
		move_sel(u, LINES / 2);
		break;
	case KEY_PPAGE:
		move_sel(u, -LINES / 2);
		break;
	case '\n':
	case '\r':
	case KEY_ENTER:
	case KEY_RIGHT:
		if (u->sel_id == 0)
			move_sel(u, 0);
		u->detail = u->sel_id != 0;
		break;
	}
	feed_index(u);
	return 0;
}

static void
poll_all(struct ui *u)
{
	top_poll_audit(u->t);
	top_poll_gateway(u->t);
}

static int
run_console(struct ui *u)
{
	SCREEN *scr;
	double next = 0;
	int ch;

	if ((scr = newterm(NULL, stdout, stdin)) == NULL)
		return cmd_error("top: cannot drive this terminal (TERM=%s)",
		    getenv("TERM") ? getenv("TERM") : "unset");
	set_term(scr);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	timeout(UI_TICK_MS);
	while (!top_stop) {
		if (!u->paused && now_s() >= next) {
			poll_all(u);
			next = now_s() + u->interval;
		}
		feed_index(u);
		draw(u);
		if ((ch = getch()) == ERR || ch == KEY_RESIZE)
			continue;
		if (key(u, ch))
			break;
	}
	endwin();
	delscreen(scr);
	return 0;
}

static int
run_once(struct ui *u)
{
	struct timespec ts;

	poll_all(u);		/* the newest rows already there */
	ts.tv_sec = (time_t)u->interval;
	ts.tv_nsec = (long)((u->interval - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && !top_stop)
		;
	poll_all(u);
	top_print_snapshot(u->t, &u->f, stdout);
	return fflush(stdout) == EOF ? 1 : 0;
}

static int
parse_decision(const char *s, enum top_decision *d)
{
	int i;

	for (i = 0; i < TOP_DEC_N; i++)
		if (strcmp(s, top_decision_names[i]) == 0) {
			*d = (enum top_decision)i;
			return 0;
		}
	return -1;
}

int
cmd_top(int argc, char *argv[])
{
	static struct ui u;
	static struct top t;
	struct sigaction sa;
	struct cmd_args a;
	const char *opt, *val, *cfg = NULL;
	char *end;
	int once = 0, rc;

	memset(&u, 0, sizeof(u));
	u.interval = 1.0;
	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|interval|sandbox|decision|"
	    "host", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg = val;
		else if (strcmp(opt, "interval") == 0) {
			u.interval = strtod(val, &end);
			if (*end != '\0' || end == val || !(u.interval >= 0.2 &&
			    u.interval <= 3600))
				return cmd_opt_error(&a, "seconds from 0.2 to "
				    "3600, got %s", val);
		} else if (strcmp(opt, "sandbox") == 0)
			snprintf(u.f.sandbox, sizeof(u.f.sandbox), "%s", val);
		else if (strcmp(opt, "host") == 0)
			snprintf(u.f.host, sizeof(u.f.host), "%s", val);
		else if (strcmp(opt, "decision") == 0) {
			if (parse_decision(val, &u.f.decision) == -1)
				return cmd_bad_value(&a,
				    "all|allow|deny|report|error", val);
		} else if (strcmp(opt, "once") == 0 || strcmp(opt, "batch") == 0)
			once = 1;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(TOP_USAGE, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(TOP_USAGE, "top: unexpected argument: "
		    "%s", a.ops[0]);
	if (!once && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)))
		return cmd_error("top: not a terminal; --once prints one "
		    "snapshot as text");
	if (top_init(&t, cfg) != 0) {
		top_free(&t);
		return 1;
	}
	u.t = &t;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = top_stop_cb;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	rc = once ? run_once(&u) : run_console(&u);
	top_free(&t);
	return rc;
}
