/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every zklock.* setting.
 *
 * zklock.hosts and zklock.root are superuser-only: the first decides which
 * ensemble a backend trusts, the second which namespace every cluster of a
 * fleet must agree on.  Timeouts apply to the next session opened.
 * zklock.on_lock_loss picks what a lost lock does to its backend;
 * zklock.synchronous_release whether a release waits for the ensemble.
 * zklock.ssl and its files are named and scoped as PostgreSQL's own ssl
 * settings (PGC_SIGHUP: postgresql.conf or ALTER SYSTEM, then a reload);
 * zklock.ssl_hostname_verification as ZooKeeper's Java client names it;
 * zklock.ssl_ticket_max_age, hidden, lets a test shorten the bound on
 * resumption.
 * The next session opened uses them, and session_tls.c reads the files
 * then.  The zklock.sasl_* settings are scoped the same way (SASL
 * authentication, session_sasl.c); zklock.sasl_mechanism takes the names
 * Cyrus SASL gives the mechanisms zklock supports, in any case.
 *
 * zklock.fleet_advisory_keys is superuser-only, as zklock's acquiring
 * functions are not for PUBLIC: it lets pg_advisory_* calls on the keys it
 * lists take locks every cluster of the fleet sees (sql_advisory.c).  Its
 * check hook parses the list once; the calls read the parsed form.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "compat.h"
#include "guc.h"
#include "hosts.h"
#include "names.h"
#include "session_sasl.h"

char	   *zkl_hosts = NULL;
char	   *zkl_root = NULL;
int			zkl_session_timeout = 30000;
int			zkl_connect_timeout = 10000;
int			zkl_on_lock_loss = ZKL_LOSS_ERROR;
char	   *zkl_auth = NULL;
char	   *zkl_fleet_advisory_keys = NULL;
bool		zkl_guc_preloaded = false;
int			zkl_node_naming = ZKL_NAMING_MUTEX;
bool		zkl_synchronous_release = true;
int			zkl_stat_max = 1000;
bool		zkl_log_lock_waits = false;
bool		zkl_log_sessions = false;
bool		zkl_ssl = false;
char	   *zkl_ssl_ca_file = NULL;
char	   *zkl_ssl_cert_file = NULL;
char	   *zkl_ssl_crl_file = NULL;
bool		zkl_ssl_hostname_verification = true;
char	   *zkl_ssl_key_file = NULL;
int			zkl_ssl_ticket_max_age = 300;
char	   *zkl_sasl_host = NULL;
char	   *zkl_sasl_keytab = NULL;
char	   *zkl_sasl_mechanism = NULL;
char	   *zkl_sasl_password_file = NULL;
char	   *zkl_sasl_principal = NULL;
char	   *zkl_sasl_service = NULL;
char	   *zkl_sasl_user = NULL;

static const struct config_enum_entry guc_naming_options[] = {
	{"mutex", ZKL_NAMING_MUTEX, false},
	{"readwrite", ZKL_NAMING_READWRITE, false},
	{NULL, 0, false}
};

static const struct config_enum_entry guc_loss_options[] = {
	{"error", ZKL_LOSS_ERROR, false},
	{"terminate", ZKL_LOSS_TERMINATE, false},
	{NULL, 0, false}
};

/* Bounds on zklock.root, checked before anything is created. */
#define ZKL_ROOT_MAX_DEPTH 32
#define ZKL_ROOT_MAX_BYTES 1024

/*
 * Whether ZooKeeper accepts a code point in a path.  Its server refuses
 * (PathUtils.validatePath, on UTF-16 units) NUL and the C0 and C1
 * controls, U+D800 to U+F8FF (surrogates and the private use area), and
 * U+FFF0 to U+FFFF; a code point beyond U+FFFF is a surrogate pair there.
 */
static bool
guc_znode_char_ok(pg_wchar c)
{
	return !(c < 0x20 || (c >= 0x7F && c <= 0x9F) ||
			 (c >= 0xD800 && c <= 0xF8FF) || c >= 0xFFF0);
}

/*
 * Why p is not a znode path ZooKeeper would accept, as a detail for the
 * check hook that begins with what, or NULL if it is one.  "/" itself passes only when
 * allow_slash (a chroot of "/" means none).
 */
static const char *
guc_path_problem(const char *p, const char *what, bool allow_slash)
{
	const unsigned char *u = (const unsigned char *) p;
	int			depth = 0;

	if (p == NULL || p[0] != '/')
		return psprintf("%s must be an absolute ZooKeeper path.", what);
	if (p[1] == '\0')
		return allow_slash ? NULL :
			psprintf("%s must be an absolute ZooKeeper path other than \"/\".", what);
	if (strlen(p) > ZKL_ROOT_MAX_BYTES)
		return psprintf("%s must not be longer than %d bytes.", what,
						ZKL_ROOT_MAX_BYTES);
	if (strncmp(p, "/zookeeper", 10) == 0 && (p[10] == '\0' || p[10] == '/'))
		return psprintf("%s must not be inside ZooKeeper's own \"/zookeeper\" tree.", what);
	for (size_t i = 0; u[i] != '\0';)
	{
		int			n = pg_utf_mblen(u + i);

		if (strnlen(p + i, n) < (size_t) n || !pg_utf8_islegal(u + i, n) ||
			!guc_znode_char_ok(utf8_to_unicode(u + i)))
			return psprintf("%s must be valid UTF-8 without control characters, surrogates, private use characters or U+FFF0 to U+FFFF, which ZooKeeper refuses in a path.", what);
		i += n;
	}
	while (*p == '/')
	{
		const char *end = strchr(p + 1, '/');
		size_t		len = end ? (size_t) (end - p - 1) : strlen(p + 1);

		if (len == 0 || (len == 1 && p[1] == '.') ||
			(len == 2 && p[1] == '.' && p[2] == '.'))
			return psprintf("%s must not contain empty, \".\" or \"..\" components, nor end with \"/\".", what);
		if (++depth > ZKL_ROOT_MAX_DEPTH)
			return psprintf("%s must not have more than %d components.",
							what, ZKL_ROOT_MAX_DEPTH);
		p += len + 1;
	}
	return NULL;
}

/* zklock.root: a path ZooKeeper accepts, outside /zookeeper, bounded. */
static bool
guc_check_root(char **newval, void **extra, GucSource source)
{
	const char *problem = guc_path_problem(*newval, "The root", false);

	(void) extra;
	(void) source;
	if (problem == NULL)
		return true;
	GUC_check_errdetail("%s", problem);
	return false;
}

/*
 * The chroot of a connect string (from its first '/'), or NULL.  A chroot
 * of "/" is none.
 */
const char *
zkl_guc_chroot(void)
{
	const char *slash = zkl_hosts ? strchr(zkl_hosts, '/') : NULL;

	return slash && slash[1] != '\0' ? slash : NULL;
}

/*
 * zklock.hosts: a connect string whose servers zklock can read (hosts.c:
 * host:port entries, 2181 when the port is left out, IPv6 in brackets),
 * and whose chroot, if any, is a path ZooKeeper accepts and not
 * ZooKeeper's own tree.  Whether the hosts resolve and answer is seen
 * when a session opens.  Empty is unset.
 */
static bool
guc_check_hosts(char **newval, void **extra, GucSource source)
{
	const char *slash;
	const char *problem;
	char		buf[256];

	(void) extra;
	(void) source;
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (zkl_hosts_parse(*newval, NULL, buf, sizeof(buf)) < 0)
	{
		GUC_check_errdetail("%s", buf);
		GUC_check_errhint("zklock.hosts is a ZooKeeper connect string: host:port entries separated by commas, then an optional chroot path, as in zk1:2181,zk2:2181,[2001:db8::3]:2181/app.");
		return false;
	}
	slash = strchr(*newval, '/');
	if (slash == NULL)
		return true;
	problem = guc_path_problem(slash, "The chroot", true);
	if (problem == NULL)
		return true;
	GUC_check_errdetail("%s", problem);
	return false;
}

/*
 * zklock.fleet_advisory_keys parsed: every key, or the listed ones.  A
 * key of two integers (k1:k2) is kept as k1 in the high half and k2 in
 * the low half, flagged pair: pg_advisory_lock(bigint) and
 * pg_advisory_lock(int, int) are different locks, as in PostgreSQL.
 */
typedef struct GucFleetKey
{
	bool		pair;
	int64		key;
} GucFleetKey;

typedef struct GucFleetKeys
{
	bool		all;
	int			n;
	GucFleetKey keys[FLEXIBLE_ARRAY_MEMBER];
} GucFleetKeys;

static GucFleetKeys *guc_fleet_keys = NULL;

/*
 * A whole signed decimal number within [min, max], blanks around it
 * ignored, else false.
 */
static bool
guc_parse_int(const char *s, int64 min, int64 max, int64 *out)
{
	char	   *end;
	long long	v;

	s += strspn(s, " \t");
	if (*s == '\0' || isspace((unsigned char) *s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	end += strspn(end, " \t");
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = (int64) v;
	return true;
}

/* s with the blanks at its ends cut off, in place. */
static char *
guc_trim(char *s)
{
	char	   *end;

	s += strspn(s, " \t");
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

/* One entry of the list: k, or k1:k2 (blanks around either half ignored). */
static bool
guc_parse_fleet_key(char *entry, GucFleetKey *key)
{
	char	   *colon = strchr(entry, ':');
	int64		k1;
	int64		k2;
	bool		ok;

	if (colon == NULL)
	{
		key->pair = false;
		return guc_parse_int(entry, PG_INT64_MIN, PG_INT64_MAX, &key->key);
	}
	*colon = '\0';
	ok = guc_parse_int(entry, PG_INT32_MIN, PG_INT32_MAX, &k1) &&
		guc_parse_int(colon + 1, PG_INT32_MIN, PG_INT32_MAX, &k2);
	*colon = ':';
	if (!ok)
		return false;
	key->pair = true;
	key->key = (int64) (((uint64) (uint32) k1 << 32) | (uint32) k2);
	return true;
}

/*
 * zklock.fleet_advisory_keys: empty, "*", or keys separated by commas,
 * each a bigint or two integers joined by a colon, blanks around them
 * ignored.  An empty entry ('42,,43', a trailing comma) is refused, as a
 * likely typo in a list that decides which locks the fleet sees
 * (zklock.hosts, a connect string, skips them).  GUC_LIST_INPUT lets SET
 * and ALTER ROLE ... SET take the keys unquoted (= 42, 43).  The parsed list goes to the assign hook as extra, allocated
 * as the GUC machinery of each major frees it.
 */
static bool
guc_check_fleet_keys(char **newval, void **extra, GucSource source)
{
	const char *val = *newval ? *newval : "";
	int			n = 1;
	char	   *copy;
	char	   *rest;
	char	   *tok;
	GucFleetKeys *keys;

	(void) source;
	for (const char *p = val; *p; p++)
		n += *p == ',';
	keys = zkl_compat_guc_malloc(offsetof(GucFleetKeys, keys) +
								 n * sizeof(GucFleetKey));
	copy = strdup(val);
	if (keys == NULL || copy == NULL)
	{
		if (keys)
			zkl_compat_guc_free(keys);
		free(copy);
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errmsg("out of memory");
		return false;
	}
	keys->all = false;
	keys->n = 0;
	rest = copy;
	while (strspn(val, " \t") != strlen(val) &&
		   (tok = strsep(&rest, ",")) != NULL)
	{
		tok = guc_trim(tok);
		if (strcmp(tok, "*") == 0)
			keys->all = true;
		else if (!guc_parse_fleet_key(tok, &keys->keys[keys->n++]))
		{
			GUC_check_errdetail("\"%s\" is not an advisory lock key.", tok);
			GUC_check_errhint("List bigint keys, or pairs of integer keys written k1:k2, separated by commas, as in '75474063, 7:42'; or '*' for every key.");
			zkl_compat_guc_free(keys);
			free(copy);
			return false;
		}
	}
	free(copy);
	*extra = keys;
	return true;
}

static void
guc_assign_fleet_keys(const char *newval, void *extra)
{
	(void) newval;
	guc_fleet_keys = extra;
}

/* zklock.sasl_mechanism off: the last session's password is wiped. */
static void
guc_assign_sasl_mechanism(const char *newval, void *extra)
{
	(void) extra;
	if (newval == NULL || newval[0] == '\0')
		zkl_sess_sasl_wipe_password();
}

/*
 * zklock.sasl_mechanism: empty (off) or a mechanism zklock supports,
 * written as SASL names it whatever case it was given in.
 */
static bool
guc_check_sasl_mechanism(char **newval, void **extra, GucSource source)
{
	static const char *const mechanisms[] = {"DIGEST-MD5", "GSSAPI"};

	(void) extra;
	(void) source;
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	for (size_t i = 0; i < lengthof(mechanisms); i++)
		if (pg_strcasecmp(*newval, mechanisms[i]) == 0)
		{
			char	   *canon = zkl_compat_guc_malloc(strlen(mechanisms[i]) + 1);

			if (canon == NULL)
				return false;
			strcpy(canon, mechanisms[i]);
			zkl_compat_guc_free(*newval);
			*newval = canon;
			return true;
		}
	GUC_check_errdetail("zklock does not support the SASL mechanism \"%s\".",
						*newval);
	GUC_check_errhint("Use DIGEST-MD5 (a user and a password file) or GSSAPI (Kerberos, a keytab), or an empty string for no SASL.");
	return false;
}

/*
 * Whether a pg_advisory_* key is fleet-wide: pair is the (int, int) form,
 * whose key holds k1 in its high half and k2 in its low half.
 */
bool
zkl_guc_fleet_key(bool pair, int64 key)
{
	if (guc_fleet_keys == NULL)
		return false;
	if (guc_fleet_keys->all)
		return true;
	for (int i = 0; i < guc_fleet_keys->n; i++)
		if (guc_fleet_keys->keys[i].pair == pair &&
			guc_fleet_keys->keys[i].key == key)
			return true;
	return false;
}

/*
 * The settings, in the order PostgreSQL sorts them (by name).  Before 16,
 * PostgreSQL appends each new setting to a sorted array and sorts it again;
 * an append that keeps it sorted costs one pass instead of a sort.  That is
 * part of the first call in every backend that loads zklock.  The TLS
 * settings are named as PostgreSQL names its own.
 */
void
zkl_guc_define(void)
{
	/*
	 * Credentials: superuser-only and hidden from SHOW ALL and pg_settings
	 * for everyone else.  No check hook, since a rejected value would be
	 * echoed in the error; the form is checked when a session opens.
	 */
	DefineCustomStringVariable("zklock.auth",
							   "ZooKeeper digest credentials (user:password) for new sessions.",
							   "With it set, lock nodes can be changed or deleted only by this identity.",
							   &zkl_auth,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("zklock.connect_timeout",
							"Time allowed to connect to ZooKeeper before an error.",
							NULL,
							&zkl_connect_timeout,
							10000, 100, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.fleet_advisory_keys",
							   "Advisory lock keys whose pg_advisory_* locks are taken fleet-wide, in ZooKeeper too.",
							   "Bigint keys, or integer pairs written k1:k2, separated by commas; * for every key. A listed key's pg_advisory_* calls also take zklock's lock of that key.",
							   &zkl_fleet_advisory_keys,
							   "",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   guc_check_fleet_keys, guc_assign_fleet_keys, NULL);
	DefineCustomStringVariable("zklock.hosts",
							   "ZooKeeper connect string (host:port,...[/chroot]).",
							   "Used when a backend opens its ZooKeeper session.",
							   &zkl_hosts,
							   "",
							   PGC_SUSET,
							   0,
							   guc_check_hosts, NULL, NULL);
	DefineCustomBoolVariable("zklock.log_lock_waits",
							 "Logs ZooKeeper lock waits that last longer than deadlock_timeout.",
							 "Once when the wait has lasted deadlock_timeout (with the holder), and once when it ends.",
							 &zkl_log_lock_waits,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("zklock.log_sessions",
							 "Logs each ZooKeeper session this backend opens and closes, with where the time went.",
							 "The open: name resolution, the start of the client's threads, connection and session creation. The close at exit: the wait for releases, then the close itself.",
							 &zkl_log_sessions,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.node_naming",
							 "Node names of exclusive locks: Curator's InterProcessMutex or InterProcessReadWriteLock.",
							 "mutex names exclusive nodes -lock-, readwrite names them -__WRIT__; shared nodes are -__READ__ either way.",
							 &zkl_node_naming,
							 ZKL_NAMING_MUTEX,
							 guc_naming_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.on_lock_loss",
							 "What to do when a held lock's session is lost.",
							 "error refuses every commit until the lock is released; terminate ends the backend.",
							 &zkl_on_lock_loss,
							 ZKL_LOSS_ERROR,
							 guc_loss_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.root",
							   "ZooKeeper path under which lock directories live.",
							   "Every cluster that shares locks must use the same root.",
							   &zkl_root,
							   "/zklock",
							   PGC_SUSET,
							   0,
							   guc_check_root, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_host",
							   "Server name the SASL exchange names (the host part of the service principal).",
							   "Empty: for GSSAPI the server's name as written in zklock.hosts, for DIGEST-MD5 zk-sasl-md5, the name ZooKeeper servers use.",
							   &zkl_sasl_host,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_keytab",
							   "Location of the keytab holding zklock.sasl_principal's key, for GSSAPI.",
							   "Relative paths are relative to the data directory. It must not be readable by group or others.",
							   &zkl_sasl_keytab,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_mechanism",
							   "SASL mechanism new ZooKeeper sessions authenticate with.",
							   "Empty for none; DIGEST-MD5 (zklock.sasl_user and zklock.sasl_password_file) or GSSAPI (Kerberos: zklock.sasl_principal and zklock.sasl_keytab).",
							   &zkl_sasl_mechanism,
							   "",
							   PGC_SIGHUP,
							   0,
							   guc_check_sasl_mechanism, guc_assign_sasl_mechanism, NULL);
	DefineCustomStringVariable("zklock.sasl_password_file",
							   "Location of the file whose first line is zklock.sasl_user's password, for DIGEST-MD5.",
							   "Relative paths are relative to the data directory. It must not be readable by group or others, as for zklock.ssl_key_file.",
							   &zkl_sasl_password_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_principal",
							   "Kerberos principal zklock authenticates as, for GSSAPI.",
							   "Its key must be in zklock.sasl_keytab.",
							   &zkl_sasl_principal,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_service",
							   "Service name of the ZooKeeper servers in the SASL exchange.",
							   "The first part of their Kerberos principal (zookeeper/host@REALM), and of DIGEST-MD5's digest-uri.",
							   &zkl_sasl_service,
							   "zookeeper",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_user",
							   "User name zklock authenticates as, for DIGEST-MD5.",
							   "One of the users of the servers' JAAS Server section (user_<name>).",
							   &zkl_sasl_user,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("zklock.session_timeout",
							"ZooKeeper session timeout requested for new sessions.",
							"The ensemble may negotiate it into its own bounds. Locks held by a backend that stopped answering are freed after it.",
							&zkl_session_timeout,
							30000, 100, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("zklock.ssl",
							 "Connects to ZooKeeper over TLS with a client certificate.",
							 "With it on, new sessions use TLS only, never plain text; the certificate's subject is the session's identity (ACL scheme x509).",
							 &zkl_ssl,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.ssl_ca_file",
							   "Location of the file of CA certificates that sign the ZooKeeper servers' certificates.",
							   "Relative paths are relative to the data directory.",
							   &zkl_ssl_ca_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.ssl_cert_file",
							   "Location of the client certificate file zklock presents to ZooKeeper.",
							   "Relative paths are relative to the data directory.",
							   &zkl_ssl_cert_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.ssl_crl_file",
							   "Location of the file of certificate revocation lists for the ZooKeeper servers' certificates.",
							   "Relative paths are relative to the data directory. A server certificate it revokes is refused.",
							   &zkl_ssl_crl_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomBoolVariable("zklock.ssl_hostname_verification",
							 "Requires each ZooKeeper server's certificate to name the host it was reached under.",
							 "The name in zklock.hosts (DNS subject alternative names) or the address (IP subject alternative names), as ZooKeeper's zookeeper.ssl.hostnameVerification.",
							 &zkl_ssl_hostname_verification,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.ssl_key_file",
							   "Location of the client certificate's private key file.",
							   "Relative paths are relative to the data directory. It must not be readable by group or others, as for ssl_key_file.",
							   &zkl_ssl_key_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	/* A developer setting: tests shorten the bound to see it hold. */
	DefineCustomIntVariable("zklock.ssl_ticket_max_age",
							"Longest time a TLS session is resumed after a full handshake verified the server's chain.",
							"A resumption verifies no chain; past this, the next connection makes a full handshake under the files in force. It can only shorten the default.",
							&zkl_ssl_ticket_max_age,
							300, 1, 300,
							PGC_SIGHUP,
							GUC_UNIT_S | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	/* Like pg_stat_statements.max: only where the memory is made. */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("zklock.stat_max",
								"Most lock names zk_stat_locks keeps (per database, user and mode).",
								"Past it, the least used are evicted (zk_stat_sessions.dealloc counts them). Needs zklock in shared_preload_libraries.",
								&zkl_stat_max,
								1000, 100, 1000000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
	DefineCustomBoolVariable("zklock.synchronous_release",
							 "Waits for the ensemble to confirm releases before they return.",
							 "With it on, a lock released by zk_unlock, COMMIT or ROLLBACK is free for every other client when the command returns; off returns at once and lets another client find the lock still taken for a round trip.",
							 &zkl_synchronous_release,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("zklock");
}

/* The infix of exclusive lock nodes under zklock.node_naming. */
const char *
zkl_guc_exclusive_infix(void)
{
	return zkl_node_naming == ZKL_NAMING_READWRITE ?
		ZKL_WRITE_INFIX : ZKL_EXCLUSIVE_INFIX;
}

/* Whether new sessions authenticate (zklock.auth is set). */
bool
zkl_guc_use_auth(void)
{
	return zkl_auth != NULL && zkl_auth[0] != '\0';
}
