// Certificates for TLS tests, made once per test process with the `openssl` command in a temp dir:
// a CA, a server certificate for 127.0.0.1 and localhost signed by it, a client certificate signed
// by it, and the bad ones: a certificate of another CA, one for another name, and an expired one
// (made under faketime). Removed when the process exits.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace rsc::testing {

class TestPki {
 public:
  static const TestPki& get() {
    static TestPki p;
    return p;
  }
  std::string dir;
  std::string ca() const { return dir + "/ca.crt"; }
  std::string serverCert() const { return dir + "/server.crt"; }
  std::string serverKey() const { return dir + "/server.key"; }
  std::string clientCert() const { return dir + "/client.crt"; }
  std::string clientKey() const { return dir + "/client.key"; }
  std::string otherCa() const { return dir + "/other-ca.crt"; }          // trusts nothing here
  std::string otherServerCert() const { return dir + "/other-server.crt"; }  // by other-ca, for 127.0.0.1
  std::string otherServerKey() const { return dir + "/other-server.key"; }
  std::string wrongNameCert() const { return dir + "/wrong-name.crt"; }  // by ca, for elsewhere.example only
  std::string wrongNameKey() const { return dir + "/wrong-name.key"; }
  std::string expiredCert() const { return dir + "/expired.crt"; }       // by ca, for 127.0.0.1, expired in 2020
  std::string expiredKey() const { return dir + "/expired.key"; }

  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  // Makes a key and a certificate NAME.{key,crt} signed by the CA `by` for the subject alt names
  // `san`, valid `days` (under `prefix`, e.g. faketime, for a certificate of another time).
  void issue(const std::string& name, const std::string& by, const std::string& san, const std::string& prefix = "",
             int days = 3650) const {
    const std::string d = dir + "/";
    run("openssl req -newkey rsa:2048 -nodes -keyout " + d + name + ".key -subj /CN=" + name + " -out " + d + name +
        ".csr");
    std::ofstream(d + name + ".ext") << "subjectAltName=" << san << "\nextendedKeyUsage=serverAuth,clientAuth\n";
    run(prefix + "openssl x509 -req -in " + d + name + ".csr -CA " + d + by + ".crt -CAkey " + d + by +
        ".key -CAcreateserial -days " + std::to_string(days) + " -extfile " + d + name + ".ext -out " + d + name + ".crt");
  }

 private:
  TestPki() {
    char tmpl[] = "/tmp/rsc-pki-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    for (const char* ca : {"ca", "other-ca"})
      run("openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=rsc-test-" + std::string(ca) + " -keyout " + dir +
          "/" + ca + ".key -out " + dir + "/" + ca + ".crt");
    issue("server", "ca", "IP:127.0.0.1,DNS:localhost");
    issue("client", "ca", "DNS:rsc-client");
    issue("other-server", "other-ca", "IP:127.0.0.1,DNS:localhost");
    issue("wrong-name", "ca", "DNS:elsewhere.example");
    issue("expired", "ca", "IP:127.0.0.1,DNS:localhost", "faketime 2020-01-01 ", 30);
  }
  static void run(const std::string& cmd) {
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) throw std::runtime_error("test PKI: failed: " + cmd);
  }
};

}  // namespace rsc::testing
