/* octweb-tls.so - lets Debian 12's civetweb 1.15 use OpenSSL 3.
 *
 * civetweb loads OpenSSL itself (dlopen("libssl.so") + dlsym of a list of
 * names) and, on every TLS connection, calls SSL_get_peer_certificate,
 * which OpenSSL 3 no longer exports (it became a macro for
 * SSL_get1_peer_certificate): the pointer is NULL and the first TLS client
 * crashes the server.  This library's soname is "libssl.so"; octweb loads
 * it (RTLD_GLOBAL) before starting civetweb, whose dlopen("libssl.so") then
 * returns it, and dlsym finds every other name in its dependency, the real
 * libssl.so.3.  Same semantics: both return a new reference.
 */
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate
X509 *SSL_get_peer_certificate(const SSL *s);
X509 *SSL_get_peer_certificate(const SSL *s) { return SSL_get1_peer_certificate(s); }
