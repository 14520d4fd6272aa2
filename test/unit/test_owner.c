/*
 * Unit tests of src/owner.c: the owner record of zklock's nodes, written
 * by its formatter and read back by its parser (a round trip, field by
 * field, and the exact bytes zklock writes), read back too from data that
 * any ZooKeeper client may have written.  Known documents, then a fuzz run (mutations of real records and random bytes) that checks
 * the parser never reads or writes out of bounds (built with AddressSanitizer
 * by `make unit`), never hands out invalid UTF-8, and agrees with itself.
 * TAP output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "owner.h"
#include "tap.h"

static const char *const zklock_record =
"{\"host\":\"db1\",\"port\":5432,\"cluster_name\":\"west\",\"pid\":4242,"
"\"database\":\"app\",\"user\":\"jobs\",\"application_name\":\"psql\","
"\"acquired_at\":\"2026-11-23 10:00:00.123456+00\"}";

/*
 * Parse a NUL-terminated document with a right-sized heap buffer, which
 * lives until the next call.
 */
static char *parse_buf = NULL;

static bool
parse(const char *doc, ZklOwner *o)
{
	size_t		len = strlen(doc);

	free(parse_buf);
	parse_buf = malloc(ZKL_OWNER_BUF(len));
	return zkl_owner_parse(doc, len, parse_buf, o);
}

static bool
same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static void
test_known(void)
{
	ZklOwner	o;

	check(parse(zklock_record, &o), "zklock's record parses");
	check(same(o.host, "db1") && same(o.cluster_name, "west") &&
		  same(o.database, "app") && same(o.user, "jobs") &&
		  same(o.application_name, "psql") &&
		  same(o.acquired_at, "2026-11-23 10:00:00.123456+00"),
		  "every string field is read");
	check(o.has_port && o.port == 5432 && o.has_pid && o.pid == 4242,
		  "port and pid are read");

	check(!parse("{\"host\":\"db1\",\"port\":5432", &o) && o.host == NULL,
		  "a truncated record is refused and leaves nothing");
	check(!parse("{\"host\":\"db1\"} x", &o), "trailing bytes are refused");
	check(!parse("{\"host\":'db1'}", &o), "single quotes are not JSON");
	check(!parse("192.168.1.7", &o), "Curator's default data (an address) is no record");
	check(!parse("[1,2]", &o) && !parse("\"x\"", &o) && !parse("", &o),
		  "arrays, strings and nothing are no record");

	check(parse("{\"host\":7,\"port\":\"5432\",\"pid\":1e3,\"user\":null}", &o) &&
		  o.host == NULL && !o.has_port && !o.has_pid && o.user == NULL,
		  "fields of the wrong type are left out");
	check(parse("{\"port\":2147483648,\"pid\":-2147483648}", &o) &&
		  !o.has_port && o.has_pid && o.pid == INT32_MIN,
		  "integers beyond int32 are left out, int32's limits are kept");
	check(parse("{\"pid\":7,\"max_leases\":3,\"waits_max_leases\":\"3\"}", &o) &&
		  o.has_max_leases && o.max_leases == 3 && !o.has_waits_max_leases &&
		  o.has_pid && o.pid == 7,
		  "a semaphore node's max_leases is read, a string is not a limit");
	check(parse("{\"waits_max_leases\":10}", &o) && o.has_waits_max_leases &&
		  o.waits_max_leases == 10 && !o.has_max_leases,
		  "a lease wait entry's limit is read");
	check(parse("{\"port\":99999999999999999999999999}", &o) && !o.has_port,
		  "a huge integer does not overflow");
	check(parse("{\"host\":\"a\",\"host\":\"b\"}", &o) && same(o.host, "b"),
		  "the last of duplicate keys wins, as in jsonb");
	check(parse("{\"h\\u006fst\":\"x\\u00e9\\ud83d\\ude00\\n\"}", &o) &&
		  same(o.host, "x\xc3\xa9\xf0\x9f\x98\x80\n"),
		  "escapes in keys and values decode to UTF-8");
	check(!parse("{\"host\":\"\\u0000\"}", &o), "\\u0000 is refused (text cannot hold it)");
	check(!parse("{\"host\":\"\\ud83d\"}", &o) &&
		  !parse("{\"host\":\"\\ude00\"}", &o),
		  "lone surrogates are refused");
	check(!parse("{\"host\":\"\xc3\x28\"}", &o) &&
		  !parse("{\"host\":\"\xed\xa0\x80\"}", &o) &&
		  !parse("{\"host\":\"\xc0\xaf\"}", &o),
		  "invalid, surrogate and overlong UTF-8 is refused");
	check(!parse("{\"host\":\"a\tb\"}", &o), "raw control characters are refused");
	check(parse(" {\"x\":{\"y\":[1,{\"z\":[]}],\"w\":true},\"host\":\"h\"} ", &o) &&
		  same(o.host, "h"),
		  "nested values of unknown keys are skipped");
	{
		char		deep[200];

		memset(deep, '[', sizeof(deep));
		memcpy(deep, "{\"x\":", 5);
		deep[sizeof(deep) - 1] = '\0';
		check(!parse(deep, &o), "deep nesting is refused, not recursed into");
		}
}

/* xorshift: the same fuzz run every time. */
static uint64_t fuzz_state = 0x9E3779B97F4A7C15ULL;

static uint32_t
fuzz_next(void)
{
	fuzz_state ^= fuzz_state << 13;
	fuzz_state ^= fuzz_state >> 7;
	fuzz_state ^= fuzz_state << 17;
	return (uint32_t) (fuzz_state >> 16);
}

/* A field is either absent or valid UTF-8 inside the buffer. */
static bool
field_ok(const char *f, const char *buf, size_t buflen)
{
	if (f == NULL)
		return true;
	if (f < buf || f >= buf + buflen)
		return false;
	return zkl_owner_utf8_valid(f, strlen(f)) && f + strlen(f) < buf + buflen;
}

static void
test_fuzz(void)
{
	static const char pieces[] = "{}[]\",:\\u0123456789abcdefABCDEF-+.eEtrufalsn \t\n\x80\xc3\xed\xf0\xff";
	int			bad = 0;
	int			parsed = 0;

	for (int iter = 0; iter < 200000; iter++)
	{
		size_t		base = strlen(zklock_record);
		size_t		len = iter % 4 == 0 ? fuzz_next() % 64 : base;
		char	   *doc = malloc(len + 1);
		char	   *buf = malloc(ZKL_OWNER_BUF(len));
		char	   *buf2 = malloc(ZKL_OWNER_BUF(len));
		ZklOwner	o;
		ZklOwner	o2;
		bool		ok;

		if (iter % 4 == 0)
			for (size_t i = 0; i < len; i++)
				doc[i] = pieces[fuzz_next() % (sizeof(pieces) - 1)];
		else
		{
			int			edits = 1 + fuzz_next() % 4;

			memcpy(doc, zklock_record, len);
			for (int e = 0; e < edits; e++)
				doc[fuzz_next() % len] = (fuzz_next() % 3 == 0)
					? (char) (fuzz_next() & 0xFF)
					: pieces[fuzz_next() % (sizeof(pieces) - 1)];
			if (fuzz_next() % 5 == 0)
				len = fuzz_next() % (len + 1);
		}
		doc[len] = '\0';
		/* Exactly len bytes: anything past them would be read by ASan as a bug. */
		{
			char	   *exact = malloc(len ? len : 1);

			memcpy(exact, doc, len);
			ok = zkl_owner_parse(exact, len, buf, &o);
			if (zkl_owner_parse(exact, len, buf2, &o2) != ok ||
				o.has_port != o2.has_port || o.has_pid != o2.has_pid ||
				(o.host == NULL) != (o2.host == NULL))
				bad++;
			free(exact);
		}
		if (ok)
		{
			parsed++;
			if (!field_ok(o.host, buf, ZKL_OWNER_BUF(len)) ||
				!field_ok(o.cluster_name, buf, ZKL_OWNER_BUF(len)) ||
				!field_ok(o.database, buf, ZKL_OWNER_BUF(len)) ||
				!field_ok(o.user, buf, ZKL_OWNER_BUF(len)) ||
				!field_ok(o.application_name, buf, ZKL_OWNER_BUF(len)) ||
				!field_ok(o.acquired_at, buf, ZKL_OWNER_BUF(len)))
				bad++;
		}
		else if (o.host || o.user || o.has_pid || o.has_port)
			bad++;
		free(doc);
		free(buf);
		free(buf2);
	}
	printf("# fuzz: 200000 documents, %d parsed as records\n", parsed);
	check(bad == 0, "fuzz: every result is consistent, in bounds and valid UTF-8");
	check(parsed > 1000, "fuzz: mutations still reach the parsed path");
}

/* Whether every field of two records is the same. */
static bool
same_owner(const ZklOwner *a, const ZklOwner *b)
{
	return same(a->host, b->host) && same(a->cluster_name, b->cluster_name) &&
		same(a->database, b->database) && same(a->user, b->user) &&
		same(a->application_name, b->application_name) &&
		same(a->acquired_at, b->acquired_at) &&
		same(a->waits_dir, b->waits_dir) && same(a->waits_node, b->waits_node) &&
		a->has_port == b->has_port && (!a->has_port || a->port == b->port) &&
		a->has_pid == b->has_pid && (!a->has_pid || a->pid == b->pid) &&
		a->has_max_leases == b->has_max_leases &&
		(!a->has_max_leases || a->max_leases == b->max_leases) &&
		a->has_waits_max_leases == b->has_waits_max_leases &&
		(!a->has_waits_max_leases || a->waits_max_leases == b->waits_max_leases);
}

/* Format o into a right-sized heap buffer (the caller frees it). */
static char *
format(const ZklOwner *o)
{
	size_t		len = zkl_owner_format(o, NULL, 0);
	char	   *buf = malloc(len + 1);

	check(zkl_owner_format(o, buf, len + 1) == len && strlen(buf) == len,
		  "the formatter's length is the record's length");
	return buf;
}

static void
test_format(void)
{
	ZklOwner	o = {0};
	ZklOwner	back;
	char	   *doc;
	char		small[8];

	o.host = "db1";
	o.has_port = true;
	o.port = 5432;
	o.cluster_name = "west";
	o.has_pid = true;
	o.pid = 4242;
	o.database = "app";
	o.user = "jobs";
	o.application_name = "psql";
	o.acquired_at = "2026-11-23 10:00:00.123456+00";
	doc = format(&o);
	check(strcmp(doc, zklock_record) == 0, "the formatter writes zklock's record byte for byte");
	check(parse(doc, &back) && same_owner(&o, &back), "a lock node's record round-trips");
	free(doc);

	o.has_max_leases = true;
	o.max_leases = 3;
	doc = format(&o);
	check(strcmp(doc + strlen(doc) - 16, ",\"max_leases\":3}") == 0,
		  "a semaphore's node ends with its max_leases");
	check(parse(doc, &back) && same_owner(&o, &back), "a lease's record round-trips");
	free(doc);

	o.waits_dir = "/zklock/a%2Fb";
	o.waits_node = "_c_0123-lease-0000000007";
	o.has_waits_max_leases = true;
	o.waits_max_leases = 3;
	doc = format(&o);
	check(strncmp(doc, "{\"waits_dir\":\"/zklock/a%2Fb\",\"waits_node\":", 41) == 0,
		  "a wait entry's fields come first");
	check(parse(doc, &back) && same_owner(&o, &back), "a wait entry round-trips");
	free(doc);

	o.application_name = "q\"uote\\back\b\f\n\r\t\x01\x1f/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	o.user = "";
	o.has_port = false;
	o.has_pid = true;
	o.pid = -2147483647 - 1;
	doc = format(&o);
	check(strstr(doc, "\"q\\\"uote\\\\back\\b\\f\\n\\r\\t\\u0001\\u001f/ ") != NULL,
		  "strings are escaped as escape_json escapes them");
	check(strstr(doc, "\"port\"") == NULL, "an integer without has_* is left out");
	check(parse(doc, &back) && same_owner(&o, &back),
		  "escapes, UTF-8, an empty string and INT32_MIN round-trip");
	free(doc);

	memset(&o, 0, sizeof(o));
	doc = format(&o);
	check(strcmp(doc, "{}") == 0 && parse(doc, &back) && same_owner(&o, &back),
		  "an empty record is {} and round-trips");
	free(doc);

	o.host = "a-long-host-name";
	check(zkl_owner_format(&o, small, sizeof(small)) == 27 &&
		  strcmp(small, "{\"host\"") == 0,
		  "a short buffer gets a terminated prefix and the full length");
}

int
main(void)
{
	test_known();
	test_format();
	test_fuzz();
	free(parse_buf);
	return tap_done();
}
