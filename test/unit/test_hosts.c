/*
 * Unit tests of src/hosts.c: reading a ZooKeeper connect string's servers
 * (ports, the default port, IPv6 in brackets, the chroot) and refusing
 * what cannot be meant, and the numeric form the client library gets.
 * TAP output.
 */
#include <stdio.h>
#include <string.h>

#include "hosts.h"
#include "tap.h"

/* Parse hosts; the servers as "host|port|b" joined by spaces, or the problem. */
static const char *
parsed(const char *hosts)
{
	static char out[1024];
	ZklServer	sv[16];
	char		problem[256];
	int			n;

	if (zkl_hosts_count(hosts) > 16)
		return "too many for the test";
	n = zkl_hosts_parse(hosts, sv, problem, sizeof(problem));
	if (n < 0)
	{
		snprintf(out, sizeof(out), "ERROR %s", problem);
		return out;
	}
	out[0] = '\0';
	for (int i = 0; i < n; i++)
	{
		size_t		used = strlen(out);

		snprintf(out + used, sizeof(out) - used, "%s%.*s|%d%s", i ? " " : "",
				 (int) sv[i].host_len, sv[i].host, sv[i].port,
				 sv[i].bracketed ? "|b" : "");
	}
	return out;
}

static void
expect(const char *hosts, const char *want)
{
	const char *got = parsed(hosts);
	char		what[2048];
	int			ok = strncmp(want, "ERROR", 5) == 0 ?
		strncmp(got, want, strlen(want)) == 0 : strcmp(got, want) == 0;

	snprintf(what, sizeof(what), "\"%s\" reads as %s%s%s", hosts, want,
			 ok ? "" : ", got ", ok ? "" : got);
	check(ok, what);
}

static void
test_parse(void)
{
	expect("127.0.0.1:2181", "127.0.0.1|2181");
	expect("zk1:2181,zk2:2182,zk3:2183", "zk1|2181 zk2|2182 zk3|2183");
	expect("zk1,zk2", "zk1|2181 zk2|2181");
	expect("zk1:2181/app/locks", "zk1|2181");
	expect(" zk1:2181 , zk2:2181 ", "zk1|2181 zk2|2181");
	expect("[::1]:2181", "::1|2181|b");
	expect("[::1]", "::1|2181|b");
	expect("[2001:db8::3]:2181,10.0.0.1:2181/x", "2001:db8::3|2181|b 10.0.0.1|2181");
	expect("zk1:1,zk2:65535", "zk1|1 zk2|65535");

	expect("zk1,,zk2", "zk1|2181 zk2|2181");
	expect("zk1:2181,zk2:2181,", "zk1|2181 zk2|2181");
	expect(" , zk1", "zk1|2181");

	expect("", "ERROR The list names no server.");
	expect("/app", "ERROR The list names no server.");
	expect(",,,", "ERROR The list names no server.");
	expect(" , ", "ERROR The list names no server.");
	expect(":2181", "ERROR Server \":2181\" has no host.");
	expect("zk1:", "ERROR Server \"zk1:\" has an invalid port");
	expect("zk1:0", "ERROR Server \"zk1:0\" has an invalid port");
	expect("zk1:65536", "ERROR Server \"zk1:65536\" has an invalid port");
	expect("zk1:99999", "ERROR Server \"zk1:99999\" has an invalid port");
	expect("zk1:-1", "ERROR Server \"zk1:-1\" has an invalid port");
	expect("zk1:+21", "ERROR Server \"zk1:+21\" has an invalid port");
	expect("zk1:21x", "ERROR Server \"zk1:21x\" has an invalid port");
	expect("zk1:000002181", "ERROR Server \"zk1:000002181\" has an invalid port");
	expect("::1:2181", "ERROR Server \"::1:2181\": an IPv6 address must be in brackets");
	expect("[::1:2181", "ERROR Server \"[::1:2181\" has no \"]\"");
	expect("[::1]2181", "ERROR Server \"[::1]2181\" has something other than \":port\"");
	expect("[zk1]:2181", "ERROR Server \"[zk1]:2181\": \"zk1\" in brackets is not an IPv6 address.");
	expect("[10.0.0.1]:2181", "ERROR Server \"[10.0.0.1]:2181\": \"10.0.0.1\" in brackets");
	expect("zk[1]:2181", "ERROR Server \"zk[1]:2181\": only an IPv6 address goes in brackets");
	expect("zk 1:2181", "ERROR Server \"zk 1:2181\" has a blank inside it.");
	expect("[fe80::1]:2181", "ERROR Server \"[fe80::1]:2181\": a link-local IPv6 address");
	expect("[fe80::1%eth0]:2181", "ERROR Server \"[fe80::1%eth0]:2181\": \"fe80::1%eth0\" in brackets is not an IPv6 address.");
	check(zkl_hosts_count("a,b,c/x,y") == 3, "the chroot's commas are not servers");
}

static void
test_numeric(void)
{
	ZklServer	sv[4];
	char		problem[256];
	char		addr[ZKL_SERVER_ADDR_MAX];
	int			n = zkl_hosts_parse("10.1.2.3:2181,[2001:db8::1]:12,zk1:2181,10.1.2.3",
									sv, problem, sizeof(problem));

	check(n == 4, "four servers read");
	if (n != 4)
		return;
	check(zkl_hosts_numeric(&sv[0], addr) && strcmp(addr, "10.1.2.3:2181") == 0,
		  "an IPv4 address goes to the library as it is");
	check(zkl_hosts_numeric(&sv[1], addr) && strcmp(addr, "2001:db8::1:12") == 0,
		  "an IPv6 address goes without brackets (the library splits at the last colon)");
	check(!zkl_hosts_numeric(&sv[2], addr), "a host name is not numeric");
	check(zkl_hosts_numeric(&sv[3], addr) && strcmp(addr, "10.1.2.3:2181") == 0,
		  "the default port is written out");
	/* The longest IPv6 text form with the longest port fits. */
	n = zkl_hosts_parse("[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
						sv, problem, sizeof(problem));
	check(n == 1 && zkl_hosts_numeric(&sv[0], addr) &&
		  strcmp(addr, "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255:65535") == 0,
		  "the longest address and port fit");
}

int
main(void)
{
	test_parse();
	test_numeric();
	return tap_done();
}
