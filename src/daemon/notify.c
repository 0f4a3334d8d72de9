/*
 * sd_notify(3) for `sandgate serve` under systemd (daemon/notify.h): the
 * messages are built here, libsystemd sends them. A failure to send is
 * logged once and never stops the gateway: systemd then gives up on the
 * start by its own timeout, which is the operator's signal.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "core/log.h"
#include "daemon/notify.h"

static int notify_warned;

static void
notify_send(const char *msg)
{
	int rc = sd_notify(0, msg);

	if (rc < 0 && !notify_warned) {
		notify_warned = 1;
		log_warnx("sd_notify: cannot tell the service manager \"%.*s\": "
		    "%s", (int)strcspn(msg, "\n"), msg, strerror(-rc));
	}
}

void
daemon_notify_ready(const char *status)
{
	char msg[320];

	/* STATUS= is one line: anything after a newline is dropped. */
	if (status != NULL)
		snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%.*s",
		    (int)strcspn(status, "\n"), status);
	else
		snprintf(msg, sizeof(msg), "READY=1");
	notify_send(msg);
}

void
daemon_notify_reloading(void)
{
	struct timespec ts;
	char msg[96];

	/* systemd 253+ matches the reload to the request by this timestamp. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000ULL);
	notify_send(msg);
}

void
daemon_notify_stopping(void)
{
	notify_send("STOPPING=1");
}
