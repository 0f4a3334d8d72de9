/*
 * approval.notify (docs/approvals.md): a process of its own, forked before
 * the network process confines itself (which may never exec), that tells
 * someone of each new question of mode: ask.
 */
#ifndef SG_APPROVAL_NOTIFY_H
#define SG_APPROVAL_NOTIFY_H

struct config;

/*
 * With approval.notify set: fork the notifier (it becomes cfg->user when
 * started as root) and return the socket the gateway sends each question's
 * JSON on, one datagram each; -1 when nothing is to be notified or it could
 * not start (logged).
 */
int	approval_notifier_start(const struct config *cfg);

#endif
