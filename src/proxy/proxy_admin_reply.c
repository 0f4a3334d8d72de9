/*
 * The admin API's answers (docs/admin-api.md): JSON with its status, or an
 * error object -- one way for every endpoint's file.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>

#include "proxy/front.h"

void
admin_reply_json(struct evhttp_request *req, int code, json_t *j)
{
	struct evbuffer *out = evbuffer_new();
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	if (out != NULL && s != NULL) {
		evbuffer_add_printf(out, "%s\n", s);
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Content-Type", "application/json");
		evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", out);
	} else
		evhttp_send_error(req, 500, "out of memory");
	free(s);
	if (out != NULL)
		evbuffer_free(out);
	json_decref(j);
}

void
admin_reply_error(struct evhttp_request *req, int code, const char *msg)
{
	admin_reply_json(req, code, json_pack("{s:s}", "error", msg));
}
