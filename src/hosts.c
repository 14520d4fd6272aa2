/*-------------------------------------------------------------------------
 *
 * hosts.c
 *	  The servers of a ZooKeeper connect string (see hosts.h).
 *
 * The client library splits each entry at its last colon and needs a
 * port: it refused "zk1", took "[::1]:2181" for a host named "[::1]",
 * and wrapped a port of 99999 to another one.  zklock reads the string
 * itself, refuses what it cannot mean when the setting is made, and hands
 * the library "address:port" entries only.
 *
 *-------------------------------------------------------------------------
 */
#include "hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

const char *
zkl_hosts_end(const char *hosts)
{
	const char *chroot = strchr(hosts, '/');

	return chroot ? chroot : hosts + strlen(hosts);
}

int
zkl_hosts_count(const char *hosts)
{
	const char *end = zkl_hosts_end(hosts);
	int			n = 1;

	for (const char *p = hosts; p < end; p++)
		if (*p == ',')
			n++;
	return n;
}

static bool
hosts_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A port: 1 to 65535 in decimal digits, nothing else; -1 if not. */
static int
hosts_port(const char *p, size_t len)
{
	int			port = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++)
	{
		if (p[i] < '0' || p[i] > '9')
			return -1;
		port = port * 10 + (p[i] - '0');
	}
	return port >= 1 && port <= 65535 ? port : -1;
}

/*
 * Whether the len bytes at p, as a string, are an address of family; the
 * address into addr (room for an IPv6 one).
 */
static bool
hosts_address(int family, const char *p, size_t len, void *addr)
{
	char		buf[INET6_ADDRSTRLEN];

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, p, len);
	buf[len] = '\0';
	return inet_pton(family, buf, addr) == 1;
}

/* Read one entry (blanks around it off) into *s; false with a problem. */
static bool
hosts_entry(const char *e, size_t len, ZklServer *s, char *problem,
			size_t cap)
{
	const char *colon = NULL;
	const char *port = NULL;

	memset(s, 0, sizeof(*s));
	s->port = ZKL_DEFAULT_PORT;
	for (size_t i = 0; i < len; i++)
	{
		if (hosts_blank(e[i]))
		{
			snprintf(problem, cap, "Server \"%.*s\" has a blank inside it.",
					 (int) len, e);
			return false;
		}
	}
	if (e[0] == '[')
	{
		const char *close = memchr(e, ']', len);
		struct in6_addr addr;

		if (close == NULL)
		{
			snprintf(problem, cap, "Server \"%.*s\" has no \"]\" after its IPv6 address.",
					 (int) len, e);
			return false;
		}
		s->bracketed = true;
		s->host = e + 1;
		s->host_len = close - e - 1;
		if (close + 1 < e + len)
		{
			if (close[1] != ':')
			{
				snprintf(problem, cap, "Server \"%.*s\" has something other than \":port\" after \"]\".",
						 (int) len, e);
				return false;
			}
			port = close + 2;
		}
		if (!hosts_address(AF_INET6, s->host, s->host_len, &addr))
		{
			snprintf(problem, cap, "Server \"%.*s\": \"%.*s\" in brackets is not an IPv6 address.",
					 (int) len, e, (int) s->host_len, s->host);
			return false;
		}
		if (IN6_IS_ADDR_LINKLOCAL(&addr))
		{
			snprintf(problem, cap, "Server \"%.*s\": a link-local IPv6 address needs a network interface, which a connect string cannot name; use a global or loopback address.",
					 (int) len, e);
			return false;
		}
	}
	else
	{
		for (size_t i = 0; i < len; i++)
			if (e[i] == ':')
			{
				if (colon != NULL)
				{
					snprintf(problem, cap, "Server \"%.*s\": an IPv6 address must be in brackets, as in [::1]:2181.",
							 (int) len, e);
					return false;
				}
				colon = e + i;
			}
		s->host = e;
		s->host_len = colon ? (size_t) (colon - e) : len;
		if (colon)
			port = colon + 1;
		if (s->host_len == 0)
		{
			snprintf(problem, cap, "Server \"%.*s\" has no host.", (int) len, e);
			return false;
		}
		if (memchr(s->host, '[', s->host_len) || memchr(s->host, ']', s->host_len))
		{
			snprintf(problem, cap, "Server \"%.*s\": only an IPv6 address goes in brackets, at the start.",
					 (int) len, e);
			return false;
		}
	}
	if (port != NULL)
	{
		s->port = hosts_port(port, e + len - port);
		if (s->port < 0)
		{
			snprintf(problem, cap, "Server \"%.*s\" has an invalid port: a port is a number from 1 to 65535.",
					 (int) len, e);
			return false;
		}
	}
	return true;
}

int
zkl_hosts_parse(const char *hosts, ZklServer *servers, char *problem,
				size_t cap)
{
	const char *end = zkl_hosts_end(hosts);
	const char *p = hosts;
	int			n = 0;

	for (;;)
	{
		const char *comma = memchr(p, ',', end - p);
		const char *e = p;
		const char *stop = comma ? comma : end;

		while (e < stop && hosts_blank(*e))
			e++;
		while (stop > e && hosts_blank(stop[-1]))
			stop--;
		/* An empty entry is skipped, as the Java client and the C one do. */
		if (stop > e)
		{
			ZklServer	one;

			if (!hosts_entry(e, stop - e, servers ? &servers[n] : &one,
							 problem, cap))
				return -1;
			n++;
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	if (n == 0)
	{
		snprintf(problem, cap, "The list names no server.");
		return -1;
	}
	return n;
}

bool
zkl_hosts_numeric(const ZklServer *s, char *out)
{
	struct in6_addr addr;

	if (!hosts_address(s->bracketed ? AF_INET6 : AF_INET, s->host,
					   s->host_len, &addr))
		return false;
	/* The address as given: the library reads it the same way. */
	snprintf(out, ZKL_SERVER_ADDR_MAX, "%.*s:%d", (int) s->host_len, s->host,
			 s->port);
	return true;
}
