// nm-espvpn-auth-dialog: what NetworkManager's clients run to get an espvpn
// connection's secrets (the [GNOME] auth-dialog of the plugin's .name file).
//   nm-espvpn-auth-dialog -u UUID -n NAME -s SERVICE [-i] [-r] [--external-ui-mode] [-t HINT]...
//                         [--espvpn PATH]
// stdin: the profile (DATA_KEY/DATA_VAL/SECRET_KEY/SECRET_VAL ... DONE). See
// auth_dialog.h for the two protocols. In the classic one the dialog logs in itself
// with `espvpn --authenticate` (the password from the secrets it was given, or, when
// it has none and may interact, espvpn asks on the controlling terminal: password, OTP
// rounds, group), and returns cookie, gateway, gwcert and resolve: the service then
// connects with the cookie and never sees the password. In the external UI, a desktop
// agent's request (nm-applet, GNOME Shell: interaction, a display, no terminal) is logged in
// the same way in the login window, the secrets going back as fields not to ask; nmcli in a
// terminal gets the fields to ask.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocols/base/exec_array.h"
#include "src/nm/auth_dialog.h"
#include "src/nm/libnm.h"
#include "src/nm/service_names.h"
#ifdef ESPVPN_NM_LOGIN_WINDOW
#include "src/nm/login_window.h"
#endif
#include "src/nm/write_all.h"
#ifdef ESPVPN_NM_LIBSECRET
#include <libsecret/secret.h>
#endif

extern char** environ;

namespace {

using espvpn::Secret;
using espvpn::nm::VpnSettings;
using espvpn::nm::write_all;

struct Options {
    std::string uuid, name, service;
    std::string espvpn = espvpn::nm::kDefaultEspvpnBinary;
    bool interactive = false, reprompt = false, external_ui = false;
    std::vector<std::string> hints;  // -t: what NetworkManager asks for (a service's prompt round)
};

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: nm-espvpn-auth-dialog -u UUID -n NAME -s SERVICE [-i] [-r] [--external-ui-mode]\n"
                 "                             [-t HINT]... [--espvpn PATH]\n"
                 "  Run by NetworkManager's clients (nmcli, GNOME Shell, nm-applet) to get the secrets\n"
                 "  of an espvpn VPN connection; the profile comes on stdin.\n");
}

VpnSettings settings_from(GHashTable* data, GHashTable* secrets) {
    VpnSettings s;
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, data);
    while (g_hash_table_iter_next(&it, &k, &v)) s.data[static_cast<char*>(k)] = v ? static_cast<char*>(v) : "";
    g_hash_table_iter_init(&it, secrets);
    while (g_hash_table_iter_next(&it, &k, &v))
        s.secrets[static_cast<char*>(k)] = Secret::from_string(v ? static_cast<char*>(v) : "");
    return s;
}

#ifdef ESPVPN_NM_LIBSECRET
// The password the user's agent keeps (password-flags 1) when the agent did not give it:
// nm-applet (1.30) saves an agent-owned VPN secret in the user's Secret Service under
// NetworkManager's schema but hands VPN requests to the plugin's dialog without reading
// it back, so the dialog reads it (as NetworkManager-openvpn's dialog does). Only with a
// session bus there (no D-Bus autolaunch); no Secret Service or no item: nothing, and the
// password is asked as before.
Secret agent_owned_password(const VpnSettings& s, const std::string& uuid) {
    if (!(espvpn::nm::secret_flags(s, "password") & NM_SETTING_SECRET_FLAG_AGENT_OWNED) ||
        espvpn::nm::has_secret(s, "password"))
        return {};
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    if (!std::getenv("DBUS_SESSION_BUS_ADDRESS") &&
        !(runtime && access((std::string(runtime) + "/bus").c_str(), F_OK) == 0))
        return {};
    static const SecretSchema schema = {"org.freedesktop.NetworkManager.Connection",
                                        SECRET_SCHEMA_DONT_MATCH_NAME,
                                        {{"connection-uuid", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                         {"setting-name", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                         {"setting-key", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                         {nullptr, SECRET_SCHEMA_ATTRIBUTE_STRING}},
                                        0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    GError* error = nullptr;
    gchar* found = secret_password_lookup_sync(&schema, nullptr, &error, "connection-uuid", uuid.c_str(),
                                               "setting-name", "vpn", "setting-key", "password", nullptr);
    g_clear_error(&error);  // its text may name the service, never a secret; not needed
    if (!found) return {};
    Secret out = Secret::from_string(found);
    secret_password_free(found);  // wipes it
    return out;
}
#endif

// Runs espvpn --authenticate: stdin = the password line, or the terminal, or (a
// single sign-on with no terminal) /dev/null; stderr (espvpn's prompts and
// progress) = the terminal when there is one, else ours.
// Returns espvpn's exit status (-1: could not run it); its stdout in *output.
int run_authenticate(std::vector<std::string> args, const Secret* password, int tty, Secret* output) {
    int out_pipe[2], in_pipe[2] = {-1, -1};
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return -1;
    if (password && pipe2(in_pipe, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (password) posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    else if (tty >= 0) posix_spawn_file_actions_adddup2(&fa, tty, 0);
    else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    if (tty >= 0) posix_spawn_file_actions_adddup2(&fa, tty, 2);
    std::vector<char*> argv = espvpn::exec_array(args);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]);
    if (password) {
        close(in_pipe[0]);
        if (rc == 0) {
            std::string line(password->reveal_text());
            line += '\n';
            write_all(in_pipe[1], line);
            explicit_bzero(line.data(), line.size());
        }
        close(in_pipe[1]);
    }
    if (rc != 0) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: cannot run %s: %s\n", argv[0], std::strerror(rc));
        close(out_pipe[0]);
        return -1;
    }
    std::string text;
    char buf[4096];
    for (;;) {
        ssize_t n = read(out_pipe[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    close(out_pipe[0]);
    explicit_bzero(buf, sizeof buf);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *output = Secret::from_string(text);
    explicit_bzero(text.data(), text.size());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// After the reply the client writes QUIT (nm-applet) or closes stdin; 20 s at most.
void wait_for_quit() {
    std::string line;
    for (int waited_ms = 0; waited_ms < 20000;) {
        pollfd p{0, POLLIN, 0};
        const int r = poll(&p, 1, 200);
        if (r < 0 && errno != EINTR) return;
        if (r <= 0) {
            waited_ms += 200;
            continue;
        }
        char c;
        const ssize_t n = read(0, &c, 1);
        if (n <= 0) return;
        if (c == '\n') {
            if (line == "QUIT") return;
            line.clear();
        } else if (line.size() < 16) {
            line += c;
        }
    }
}

#ifdef ESPVPN_NM_LOGIN_WINDOW
// The GTK window does the whole login through espvpn's prompt channel (login_window.h):
// the secrets for NetworkManager, or nothing (cancelled, failed; said on stderr).
std::optional<std::map<std::string, Secret>> window_login(const Options& o, const VpnSettings& settings) {
    auto args = espvpn::nm::espvpn_authenticate_command(o.espvpn, settings, false, true);
    if (!args) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: %s\n", args.error().message.c_str());
        return std::nullopt;
    }
    espvpn::nm::LoginWindowOptions w;
    w.connection_name = o.name;
    if (auto it = settings.data.find("gateway"); it != settings.data.end()) w.gateway = it->second;
    w.argv = std::move(*args);
    w.single_sign_on = espvpn::nm::is_sso_profile(settings);
    espvpn::nm::LoginFlow flow(settings, o.reprompt);
    auto secrets = espvpn::nm::run_login_window(w, flow);
    if (!secrets) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: login to %s: %s\n", o.name.c_str(),
                     secrets.error().message.c_str());
        return std::nullopt;
    }
    return std::move(*secrets);
}

int classic_window(const Options& o, const VpnSettings& settings) {
    auto secrets = window_login(o, settings);
    if (!secrets) return 1;
    auto reply = espvpn::nm::classic_reply(*secrets);
    if (!reply || !write_all(1, reply->reveal_text())) return 1;
    wait_for_quit();
    return 0;
}

// External UI from a desktop agent (nm-applet, GNOME Shell: no terminal, a display): the
// window logs in instead of the agent's one-round prompt, and the key file hands the
// secrets over as fields not to ask (both agents pass such a field's value to NetworkManager).
int external_ui_window(const Options& o, const VpnSettings& settings) {
    auto secrets = window_login(o, settings);
    if (!secrets) return 1;
    std::string reply = espvpn::nm::external_ui_reply(o.name, settings, espvpn::nm::handed_secrets(*secrets));
    const bool ok = write_all(1, reply);
    explicit_bzero(reply.data(), reply.size());
    return ok ? 0 : 1;
}
#endif

// A terminal to ask on: a controlling terminal other than a virtual console. nmcli and nmtui
// run from a terminal emulator or ssh (a pseudo-terminal) and ask there; nm-applet and GNOME
// Shell started by the desktop session have none, or the session's virtual console, which gdm
// makes the session's controlling terminal (TIOCSCTTY) and the display server holds.
bool has_terminal_to_ask_on() {
    FILE* f = std::fopen("/proc/self/stat", "re");
    if (!f) return false;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* after_comm = std::strrchr(buf, ')');  // comm may hold spaces and parentheses
    long long tty_nr = 0;
    if (!after_comm || std::sscanf(after_comm + 1, " %*c %*d %*d %*d %lld", &tty_nr) != 1 || tty_nr == 0)
        return false;
    const auto dev = static_cast<dev_t>(tty_nr);
    return !(major(dev) == 4 && minor(dev) < 64);  // tty0..tty63: the virtual consoles
}

int classic(const Options& o, const VpnSettings& settings) {
#ifdef ESPVPN_NM_LOGIN_WINDOW
    // A person at a display (interaction allowed): the window asks whatever the server asks.
    if (o.interactive && espvpn::nm::login_window_available()) return classic_window(o, settings);
#endif
    const Secret* password = nullptr;
    if (auto it = settings.secrets.find("password"); it != settings.secrets.end() && !it->second.empty() &&
                                                      !o.reprompt)
        password = &it->second;
    int tty = -1;
    const bool sso = espvpn::nm::is_sso_profile(settings);
    if (!password) {
        if (o.interactive) tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (tty < 0 && !sso) {  // a single sign-on needs no terminal: the browser asks
            std::fprintf(stderr,
                         "nm-espvpn-auth-dialog: no password for '%s' and no terminal to ask on (a desktop asks "
                         "through --external-ui-mode)\n",
                         o.name.c_str());
            return 1;
        }
    }
    auto args = espvpn::nm::espvpn_authenticate_command(o.espvpn, settings, password != nullptr, tty >= 0);
    if (!args) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: %s\n", args.error().message.c_str());
        return 1;
    }
    // On a terminal a rejected login is asked again (3 tries); a given password once.
    for (int attempt = 1;; ++attempt) {
        Secret output;
        const int status = run_authenticate(*args, password, tty, &output);
        if (status == 0) {
            auto secrets = espvpn::nm::secrets_from_authenticate(output.reveal_text());
            if (!secrets) {
                std::fprintf(stderr, "nm-espvpn-auth-dialog: %s\n", secrets.error().message.c_str());
                return 1;
            }
            auto reply = espvpn::nm::classic_reply(*secrets);
            if (!reply || !write_all(1, reply->reveal_text())) return 1;
            if (tty >= 0) close(tty);
            wait_for_quit();
            return 0;
        }
        if (status < 0 || tty < 0 || attempt >= 3) {
            std::fprintf(stderr, "nm-espvpn-auth-dialog: login to %s failed (espvpn exit status %d)\n",
                         o.name.c_str(), status);
            return 1;
        }
        const char* again = "Login failed; try again.\n";
        write_all(tty, again);
    }
}

}  // namespace

int main(int argc, char** argv) {
    // It handles the VPN secrets: no core dump, no ptrace or /proc reads by other users.
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // GNOME Shell runs the classic dialog with stderr closed: /dev/null stands in, so nothing
    // opened later (GLib's eventfd, a pipe to espvpn) takes descriptor 2 and gets stderr's text.
    for (int fd = 0; fd <= 2; ++fd)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 1;
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "nm-espvpn-auth-dialog: %s needs a value\n", a.c_str());
                std::exit(1);
            }
            return argv[++i];
        };
        if (a == "-u" || a == "--uuid") o.uuid = value();
        else if (a == "-n" || a == "--name") o.name = value();
        else if (a == "-s" || a == "--service") o.service = value();
        else if (a == "-i" || a == "--allow-interaction") o.interactive = true;
        else if (a == "-r" || a == "--reprompt") o.reprompt = true;
        else if (a == "--external-ui-mode") o.external_ui = true;
        else if (a == "-t" || a == "--hint") o.hints.push_back(value());
        else if (a == "--espvpn") o.espvpn = value();
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            std::fprintf(stderr, "nm-espvpn-auth-dialog: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return 1;
        }
    }
    if (o.uuid.empty() || o.name.empty() || o.service.empty()) {
        usage(stderr);
        return 1;
    }
    if (o.service != espvpn::nm::kServiceBusName) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: this dialog serves %s only, not %s\n", espvpn::nm::kServiceBusName,
                     o.service.c_str());
        return 1;
    }
    GHashTable* data = nullptr;
    GHashTable* secrets = nullptr;
    if (!nm_vpn_service_plugin_read_vpn_details(0, &data, &secrets)) {
        std::fprintf(stderr, "nm-espvpn-auth-dialog: could not read the connection's data and secrets from stdin\n");
        return 1;
    }
    VpnSettings settings = settings_from(data, secrets);
    g_hash_table_unref(data);
    g_hash_table_unref(secrets);

    bool from_keyring = false;
#ifdef ESPVPN_NM_LIBSECRET
    if (!o.reprompt || espvpn::nm::challenge_round(o.hints)) {  // a round is not a refused password
        Secret kept = agent_owned_password(settings, o.uuid);
        if (!kept.empty()) {
            settings.secrets["password"] = std::move(kept);
            from_keyring = true;
        }
    }
#endif
    if (o.external_ui) {
        // The service's prompt round (a challenge after the password, a second code): the one
        // field the server asks, for a client that asks in its own prompt (nmcli, nmtui). A
        // desktop agent gets the login window below instead: a whole login whose cookie
        // replaces the service's (a round is not a refused password: the stored one answers).
        auto round = espvpn::nm::challenge_round(o.hints);
#ifdef ESPVPN_NM_LOGIN_WINDOW
        if (round && o.interactive && !has_terminal_to_ask_on() && espvpn::nm::login_window_available()) {
            Options fresh = o;
            fresh.reprompt = false;
            return external_ui_window(fresh, settings);
        }
#endif
        if (round) {
            if (!o.interactive) round->field.should_ask = false;
            std::vector<espvpn::nm::AskedSecret> asked;
            asked.push_back(std::move(round->field));
            std::string reply = espvpn::nm::external_ui_reply(o.name, settings, asked, round->message);
            const bool ok = write_all(1, reply);
            explicit_bzero(reply.data(), reply.size());
            return ok ? 0 : 1;
        }
        auto asked = espvpn::nm::secrets_to_ask(settings, o.reprompt);
#ifdef ESPVPN_NM_LOGIN_WINDOW
        // A login to do, interaction allowed, no terminal and a display (nm-applet, GNOME
        // Shell): the login window (password, OTP rounds, group choice, banner) instead of the
        // agent's one-round prompt.
        // A password the keyring kept answers the window's first prompt; the window still
        // runs, for what a server asks beyond it (an OTP round, a group); a single sign-on
        // profile gets the window's "continue in your browser" page.
        if (o.interactive && espvpn::nm::needs_login(settings, o.reprompt) && !has_terminal_to_ask_on() &&
            espvpn::nm::login_window_available())
            return external_ui_window(o, settings);
#endif
        // Without -i nothing may be asked: GNOME Settings' editor reads a profile's secrets
        // so (NetworkManager asks the agents without interaction) and nm-applet draws a
        // prompt for any ShouldAsk=true field even then.
        if (!o.interactive)
            for (auto& a : asked) a.should_ask = false;
        // Read from the keyring here: the client does not have it, so it goes in the reply.
        for (auto& a : asked)
            if (from_keyring && a.key == "password" && !a.should_ask)
                a.value = Secret::from_string(settings.secrets["password"].reveal_text());
        std::string reply = espvpn::nm::external_ui_reply(o.name, settings, asked);
        const bool ok = write_all(1, reply);
        explicit_bzero(reply.data(), reply.size());
        return ok ? 0 : 1;
    }
    return classic(o, settings);
}
