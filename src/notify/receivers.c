/* receivers.c - the registry of notification receivers (receiver.h). The
 * order is the order of the agent's start line and of delivery; the state
 * file is keyed by name, so reordering loses nothing. */
#include "receiver.h"

#include <string.h>

extern const mw_receiver mw_receiver_webhook;      /* rx_webhook.c: Mattermost, Slack */
extern const mw_receiver mw_receiver_alertmanager; /* rx_alertmanager.c: webhook payload v4 */
extern const mw_receiver mw_receiver_email;        /* rx_email.c: SMTP */

/* Add receivers here. */
const mw_receiver *const mw_receivers[] = {
    &mw_receiver_webhook,
    &mw_receiver_alertmanager,
    &mw_receiver_email,
};
const size_t mw_nreceivers = sizeof(mw_receivers) / sizeof(mw_receivers[0]);

_Static_assert(sizeof(mw_receivers) / sizeof(mw_receivers[0]) <= MW_MAX_RECEIVERS,
               "more receivers than the notifier's bitmasks hold");

int mw_receiver_index(const char *name)
{
    for (size_t i = 0; i < mw_nreceivers; i++)
        if (strcmp(mw_receivers[i]->name, name) == 0) return (int)i;
    return -1;
}
