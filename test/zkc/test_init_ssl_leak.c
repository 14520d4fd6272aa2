/*
 * ZOOKEEPER-4020 (patch 0010): zookeeper_init_ssl() must not leak its
 * certificate string.  Built with AddressSanitizer, whose leak checker
 * looks for unreachable blocks after handles opened with
 * zookeeper_init_ssl() (on a port that refuses: no TLS is ever set up)
 * were closed again.  The 3.8.0 client leaked one copy of the string per
 * call.
 */
#include <sanitizer/lsan_interface.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "zkc_test.h"

int
main(void)
{
	char		host[64];
	int			port = zkc_test_port(0, NULL);
	int			opened = 0;

	/* LeakSanitizer ends a leaking process before stdio is flushed. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	zoo_set_debug_level(0);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	for (int i = 0; i < 3; i++)
	{
		zhandle_t  *zh = zookeeper_init_ssl(host,
											"/nonexistent/ca.pem,/nonexistent/cert.pem,/nonexistent/key.pem,secret",
											NULL, 10000, NULL, NULL, 0);

		if (zh != NULL)
		{
			opened++;
			zookeeper_close(zh);
		}
	}
	check(port > 0 && opened == 3, "three handles opened with zookeeper_init_ssl and closed");
	check(__lsan_do_recoverable_leak_check() == 0,
		  "nothing of them is left unreachable (LeakSanitizer)");
	return tap_done();
}
