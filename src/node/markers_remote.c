/*
 * markers_remote.c - the marker channel's remote side: WriteTxnMarkers to
 * other brokers' partition leaders; see markers.h.
 */
#include "node/markers.h"

static void cluster_send(struct cn_broker *b, const struct cn_marker_send *s)
{
    cn_marker_channel_local.send(b, s);
}

const struct cn_marker_channel cn_marker_channel_cluster = {cluster_send};

void cn_markers_remote_stop(struct cn_broker *b)
{
    (void)b;
}
