#include "src/nm/espvpn_plugin.h"

#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "protocols/base/exec_array.h"
#include "src/nm/espvpn_command.h"
#include "src/nm/owner_files.h"
#include "src/nm/service_prompts.h"
#include "src/nm/write_all.h"

namespace espvpn::nm {
namespace {

// How long espvpn gets after SIGINT to log out and run its disconnect script
// before SIGKILL. NetworkManager-openconnect gives openconnect 2 s; a logout that
// is cut off leaves the session valid on the gateway, so we allow a slow one more.
constexpr guint kLogoutGraceSeconds = 5;
// How often a rejected password typed by the user is asked again (SecretsRequired)
// before the connection fails with LOGIN_FAILED.
constexpr int kMaxPasswordRetries = 2;

struct PluginState {
    PluginOptions options;
    GPid child = 0;
    guint child_watch = 0;
    guint kill_timer = 0;
    bool stop_requested = false;  // we sent SIGINT: its exit is not a failure
    // The failure to signal once more as the connection stops (see plugin_disconnect).
    std::optional<NMVpnPluginFailure> final_failure;
    // espvpn's stderr: relayed line by line to ours (NetworkManager's log); its last
    // first "error: " line says why it failed (later ones are consequences: a logout
    // that cannot reach the server, ...).
    int stderr_fd = -1;
    guint stderr_watch = 0;
    std::string stderr_partial;
    std::string first_error;
    // ConnectInteractive: NetworkManager can ask the user's agent for new secrets.
    bool interactive = false;
    bool password_from_user = false;  // the password's flags say agent-owned or not saved
    int password_retries = 0;
    std::function<void()> on_child_gone;
    // An interactive password login: espvpn's prompt channel (our end), what answers it.
    int prompt_fd = -1;
    guint prompt_watch = 0;
    std::string prompt_partial;
    std::optional<ServicePrompts> prompts;
};

}  // namespace
}  // namespace espvpn::nm

struct EspvpnNmPlugin {
    NMVpnServicePlugin parent;
    espvpn::nm::PluginState* state;
};
struct EspvpnNmPluginClass {
    NMVpnServicePluginClass parent;
};

G_DEFINE_TYPE(EspvpnNmPlugin, espvpn_nm_plugin, NM_TYPE_VPN_SERVICE_PLUGIN)

namespace espvpn::nm {
namespace {

PluginState& state_of(gpointer plugin) { return *reinterpret_cast<EspvpnNmPlugin*>(plugin)->state; }

VpnSettings settings_of(NMSettingVpn* vpn) {
    VpnSettings s;
    nm_setting_vpn_foreach_data_item(
        vpn, [](const char* key, const char* value, gpointer out) {
            static_cast<VpnSettings*>(out)->data[key] = value ? value : "";
        }, &s);
    nm_setting_vpn_foreach_secret(
        vpn, [](const char* key, const char* value, gpointer out) {
            static_cast<VpnSettings*>(out)->secrets[key] = Secret::from_string(value ? value : "");
        }, &s);
    return s;
}

void relay_lines(PluginState& st, bool flush) {
    std::size_t start = 0, nl;
    while ((nl = st.stderr_partial.find('\n', start)) != std::string::npos || (flush && start < st.stderr_partial.size())) {
        if (nl == std::string::npos) nl = st.stderr_partial.size();
        std::string_view line(st.stderr_partial.data() + start, nl - start);
        std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
        if (line.substr(0, 7) == "error: " && st.first_error.empty()) st.first_error = std::string(line.substr(7));
        start = nl + 1;
    }
    st.stderr_partial.erase(0, std::min(start, st.stderr_partial.size()));
    std::fflush(stderr);
}

// Reads what espvpn wrote to its stderr so far (non-blocking); false at end of file.
bool read_stderr(PluginState& st) {
    char buf[4096];
    for (;;) {
        const ssize_t n = read(st.stderr_fd, buf, sizeof buf);
        if (n > 0) {
            st.stderr_partial.append(buf, static_cast<std::size_t>(n));
            if (st.stderr_partial.size() > 65536) relay_lines(st, true);  // a line that never ends
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        relay_lines(st, n == 0);
        return !(n == 0 || (n < 0 && errno != EAGAIN));
    }
}

void close_stderr(PluginState& st) {
    if (st.stderr_fd < 0) return;
    read_stderr(st);
    relay_lines(st, true);
    if (st.stderr_watch) g_source_remove(st.stderr_watch);
    st.stderr_watch = 0;
    close(st.stderr_fd);
    st.stderr_fd = -1;
}

gboolean on_stderr(gint, GIOCondition, gpointer plugin) {
    PluginState& st = state_of(plugin);
    if (read_stderr(st)) return G_SOURCE_CONTINUE;
    st.stderr_watch = 0;
    close(st.stderr_fd);
    st.stderr_fd = -1;
    return G_SOURCE_REMOVE;
}

// Whether espvpn's failure was the server refusing the login: exit status 2 (a
// rejected cookie; GlobalProtect credentials), or AnyConnect's rejected credentials,
// which exit 1 as openconnect's do, told apart by espvpn's message. Also a prompt
// beyond the answers the service gave on stdin (the password, an otp=yes profile's
// code): the server asked again (a GP gateway refusing a wrong code falls back to its
// own password form), so what the user gave did not do: their credentials to fix.
bool login_rejected(int code, const std::string& first_error) {
    return code == 2 ||
           (code == 1 && (first_error.find("rejected the credentials") != std::string::npos ||
                          first_error.find("end of input while waiting for") != std::string::npos));
}

void close_prompts(PluginState& st) {
    if (st.prompt_watch) g_source_remove(st.prompt_watch);
    st.prompt_watch = 0;
    if (st.prompt_fd >= 0) close(st.prompt_fd);
    st.prompt_fd = -1;
    st.prompt_partial.clear();
}

// One line to espvpn's prompt channel: the answer, or "cancel".
void send_step(PluginState& st, NMVpnServicePlugin* plugin, PromptStep step) {
    using Kind = PromptStep::Kind;
    if (step.kind == Kind::ask_user) {
        g_message("espvpn asks what the profile does not answer: asking the user (%s)", step.hints.back().c_str());
        std::vector<const char*> hints;
        for (const auto& h : step.hints) hints.push_back(h.c_str());
        hints.push_back(nullptr);
        nm_vpn_service_plugin_secrets_required(plugin, step.message.c_str(), hints.data());
        return;
    }
    if (step.kind == Kind::none || st.prompt_fd < 0) return;
    std::string line;  // encode_answer's line ends with its '\n'
    if (step.kind == Kind::answer) {
        auto encoded = prompt::encode_answer(step.value);
        if (encoded) line = std::string(encoded->reveal_text());
        else g_warning("espvpn's prompt not answered: %s", encoded.error().message.c_str());
    }
    if (line.empty()) {
        line = std::string(prompt::kCancel) + '\n';
        g_message("cancelling espvpn's prompt%s%s", step.message.empty() ? "" : ": ", step.message.c_str());
    }
    if (!write_all(st.prompt_fd, line)) g_warning("could not answer espvpn's prompt: %s", std::strerror(errno));
    explicit_bzero(line.data(), line.size());
}

// espvpn's prompt records (--prompt-fd), a line each; the watch ends at end of file.
gboolean on_prompt(gint, GIOCondition, gpointer plugin) {
    PluginState& st = state_of(plugin);
    char buf[4096];
    for (;;) {
        const ssize_t n = read(st.prompt_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) {
            st.prompt_watch = 0;
            close_prompts(st);
            return G_SOURCE_REMOVE;
        }
        st.prompt_partial.append(buf, static_cast<std::size_t>(n));
        if (st.prompt_partial.size() > prompt::kMaxLine + 1) {
            g_warning("espvpn's prompt channel: a line longer than %zu bytes", prompt::kMaxLine);
            st.prompt_watch = 0;
            close_prompts(st);
            return G_SOURCE_REMOVE;
        }
    }
    std::size_t nl;
    while ((nl = st.prompt_partial.find('\n')) != std::string::npos) {
        const std::string line = st.prompt_partial.substr(0, nl);
        st.prompt_partial.erase(0, nl + 1);
        auto record = prompt::decode(line);
        if (!record) {
            g_warning("espvpn's prompt channel: %s", record.error().message.c_str());
            send_step(st, NM_VPN_SERVICE_PLUGIN(plugin), PromptStep{PromptStep::Kind::cancel, {}, {}, {}});
            continue;
        }
        if (st.prompts) send_step(st, NM_VPN_SERVICE_PLUGIN(plugin), st.prompts->on_record(*record));
    }
    return G_SOURCE_CONTINUE;
}

void child_gone(PluginState& st) {
    if (st.kill_timer) g_source_remove(st.kill_timer);
    st.kill_timer = 0;
    st.child = 0;
    st.child_watch = 0;
    st.stop_requested = false;
    if (auto cb = std::move(st.on_child_gone)) {
        st.on_child_gone = nullptr;
        cb();
    }
}

// espvpn's exit status is openconnect's: 2 = credentials/cookie rejected,
// 1 = any other error, 0 = ended on request.
void on_child_exit(GPid pid, gint wait_status, gpointer plugin) {
    PluginState& st = state_of(plugin);
    const bool expected = st.stop_requested;
    close_stderr(st);  // espvpn is gone: all it wrote is in the pipe, relayed before our verdict
    close_prompts(st);
    const bool refused = st.prompts && st.prompts->refused();
    st.prompts.reset();
    g_spawn_close_pid(pid);
    int code = -1;
    if (WIFEXITED(wait_status)) code = WEXITSTATUS(wait_status);
    if (code >= 0) g_message("espvpn (pid %d) exited with status %d", pid, code);
    else g_message("espvpn (pid %d) ended by signal %d", pid, WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
    child_gone(st);
    auto* vpn = NM_VPN_SERVICE_PLUGIN(plugin);
    if (expected) return;  // Disconnect already moved the state to stopped
    if (code != 0)
        g_message("espvpn failed: %s", st.first_error.empty() ? "(no error message)" : st.first_error.c_str());
    if ((login_rejected(code, st.first_error) || refused) && st.interactive && st.password_from_user &&
        st.password_retries < kMaxPasswordRetries) {
        // A password the user typed: ask for it again (the auth dialog gets -r), and
        // connect again from NewSecrets. A stored one fails: nobody would be asked.
        ++st.password_retries;
        g_message("the server rejected the password; asking for it again (%d of %d)", st.password_retries,
                  kMaxPasswordRetries);
        const char* hints[] = {"password", nullptr};
        nm_vpn_service_plugin_secrets_required(vpn, "The server rejected the password. Try again.", hints);
        return;
    }
    if (login_rejected(code, st.first_error) || refused) {
        st.final_failure = NM_VPN_PLUGIN_FAILURE_LOGIN_FAILED;
        nm_vpn_service_plugin_failure(vpn, NM_VPN_PLUGIN_FAILURE_LOGIN_FAILED);
    } else if (code != 0) {
        nm_vpn_service_plugin_failure(vpn, NM_VPN_PLUGIN_FAILURE_CONNECT_FAILED);
    } else {
        nm_vpn_service_plugin_disconnect(vpn, nullptr);
    }
}

gboolean kill_child(gpointer plugin) {
    PluginState& st = state_of(plugin);
    st.kill_timer = 0;
    if (st.child > 0) {
        g_warning("espvpn (pid %d) did not exit %u s after SIGINT; killing it", st.child, kLogoutGraceSeconds);
        kill(st.child, SIGKILL);
    }
    return G_SOURCE_REMOVE;
}

// The connection's vpn setting; NULL, with `error` set to `code`, when it has none.
NMSettingVpn* vpn_setting_of(NMConnection* connection, NMVpnPluginError code, GError** error) {
    NMSettingVpn* vpn = nm_connection_get_setting_vpn(connection);
    if (!vpn) g_set_error_literal(error, NM_VPN_PLUGIN_ERROR, code, "the connection has no vpn setting");
    return vpn;
}

// Who owns the profile: NetworkManager's connection.permissions, which it sends with
// the rest of the connection.
ProfileOwner owner_of(NMConnection* connection) {
    std::vector<Permission> permissions;
    if (NMSettingConnection* c = nm_connection_get_setting_connection(connection)) {
        const guint32 n = nm_setting_connection_get_num_permissions(c);
        for (guint32 i = 0; i < n; ++i) {
            const char* type = nullptr;
            const char* item = nullptr;
            if (nm_setting_connection_get_permission(c, i, &type, &item, nullptr))
                permissions.push_back({type ? type : "", item ? item : ""});
        }
    }
    return profile_owner(permissions);
}

// The files a user's profile names, opened as that user; argv then names them
// /dev/fd/N, so espvpn (root) never opens the user's paths itself. Their descriptors
// in `fds` (espvpn's kFirstFileFd, kFirstFileFd + 1, ...).
Status open_owner_files(NMConnection* connection, EspvpnCommand& command, std::vector<int>& fds) {
    const ProfileOwner owner = owner_of(connection);
    auto files = files_to_open(command, owner);
    if (!files) return files.error();
    if (files->empty()) return {};
    auto opened = open_as_owner(owner.user, *files);
    if (!opened) return opened.error();
    fds = std::move(*opened);
    std::string items;
    for (std::size_t i = 0; i < files->size(); ++i) {
        name_by_descriptor(command, (*files)[i], kFirstFileFd + static_cast<int>(i));
        items += (items.empty() ? "" : ", ") + (*files)[i].item;
    }
    g_message("opened the profile's %s as %s (the profile's owner)", items.c_str(), owner.user.c_str());
    return {};
}

gboolean start_espvpn(NMVpnServicePlugin* plugin, NMConnection* connection, GError** error) {
    PluginState& st = state_of(plugin);
    if (st.child > 0) {
        g_set_error(error, NM_VPN_PLUGIN_ERROR, NM_VPN_PLUGIN_ERROR_STOPPING_IN_PROGRESS,
                    "the previous espvpn (pid %d) is still logging out", st.child);
        return FALSE;
    }
    NMSettingVpn* vpn = vpn_setting_of(connection, NM_VPN_PLUGIN_ERROR_BAD_ARGUMENTS, error);
    if (!vpn) return FALSE;
    auto command = espvpn_command(st.options.espvpn_binary, st.options.helper_command, settings_of(vpn),
                                  st.options.verbosity);
    if (!command) {
        g_set_error(error, NM_VPN_PLUGIN_ERROR, NM_VPN_PLUGIN_ERROR_BAD_ARGUMENTS, "invalid connection: %s",
                    command.error().message.c_str());
        return FALSE;
    }
    for (const auto& key : command->ignored_keys) g_message("ignoring unknown vpn.data item '%s'", key.c_str());
    std::vector<int> file_fds;
    if (auto opened = open_owner_files(connection, *command, file_fds); !opened) {
        g_warning("espvpn not started: %s", opened.error().message.c_str());
        g_set_error(error, NM_VPN_PLUGIN_ERROR, NM_VPN_PLUGIN_ERROR_BAD_ARGUMENTS, "invalid connection: %s",
                    opened.error().message.c_str());
        return FALSE;
    }
    run_session_as_owner(*command, owner_of(connection));
    // ConnectInteractive with a password: espvpn's prompts come to us (service_prompts.h), so
    // a prompt the profile does not answer is asked of the user through NetworkManager.
    int prompt_pair[2] = {-1, -1};
    const int prompt_target = kFirstFileFd + static_cast<int>(file_fds.size());
    if (st.interactive && use_prompt_channel(*command, prompt_target) &&
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, prompt_pair) != 0) {
        g_set_error(error, NM_VPN_PLUGIN_ERROR, NM_VPN_PLUGIN_ERROR_LAUNCH_FAILED,
                    "could not make espvpn's prompt channel: %s", std::strerror(errno));
        for (int fd : file_fds) close(fd);
        return FALSE;
    }
    const auto close_files = [&file_fds] {
        for (int fd : file_fds) close(fd);
        file_fds.clear();
    };

    std::string printable;
    for (const auto& a : command->argv) printable += (printable.empty() ? "" : " ") + a;
    std::vector<char*> argv = exec_array(command->argv);
    gchar** envp = g_environ_setenv(g_get_environ(), kBusNameVariable, st.options.bus_name.c_str(), TRUE);
    int stdin_fd = -1, stderr_fd = -1;
    GPid pid = 0;
    // A soft token's key: a pipe, filled and closed before espvpn starts (a key is far
    // below the pipe's 64 KiB), becomes espvpn's descriptor kTokenFd.
    int token_pipe[2] = {-1, -1};
    if (!command->token_secret.empty()) {
        if (!g_unix_open_pipe(token_pipe, FD_CLOEXEC, error)) {
            close_files();
            g_strfreev(envp);
            return FALSE;
        }
        const bool put = write_all(token_pipe[1], command->token_secret.reveal_text());
        const int write_errno = errno;
        close(token_pipe[1]);
        if (!put) {
            close(token_pipe[0]);
            close_files();
            g_strfreev(envp);
            g_set_error(error, NM_VPN_PLUGIN_ERROR, NM_VPN_PLUGIN_ERROR_LAUNCH_FAILED,
                        "could not pass the soft token's key to espvpn: %s", std::strerror(write_errno));
            return FALSE;
        }
    }
    std::vector<gint> source_fds, target_fds;
    if (token_pipe[0] >= 0) {
        source_fds.push_back(token_pipe[0]);
        target_fds.push_back(kTokenFd);
    }
    for (std::size_t i = 0; i < file_fds.size(); ++i) {
        source_fds.push_back(file_fds[i]);
        target_fds.push_back(kFirstFileFd + static_cast<gint>(i));
    }
    if (prompt_pair[1] >= 0) {
        source_fds.push_back(prompt_pair[1]);
        target_fds.push_back(prompt_target);
    }
    const gboolean spawned = g_spawn_async_with_pipes_and_fds(
        nullptr, argv.data(), envp, G_SPAWN_DO_NOT_REAP_CHILD, nullptr, nullptr, -1, -1, -1, source_fds.data(),
        target_fds.data(), source_fds.size(), &pid, &stdin_fd, nullptr, &stderr_fd, error);
    if (token_pipe[0] >= 0) close(token_pipe[0]);
    if (prompt_pair[1] >= 0) close(prompt_pair[1]);
    close_files();
    g_strfreev(envp);
    if (!spawned) {
        if (prompt_pair[0] >= 0) close(prompt_pair[0]);
        return FALSE;
    }
    g_message("started espvpn (pid %d): %s", pid, printable.c_str());  // argv holds no secret

    if (prompt_pair[0] >= 0) {
        close(stdin_fd);  // the answers go to the prompt channel
        close_prompts(st);
        st.prompts.emplace(settings_of(vpn));
        st.prompt_fd = prompt_pair[0];
        fcntl(st.prompt_fd, F_SETFL, fcntl(st.prompt_fd, F_GETFL) | O_NONBLOCK);
        st.prompt_watch = g_unix_fd_add(st.prompt_fd, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR),
                                        on_prompt, plugin);
    } else {
        std::string line(command->stdin_line.reveal_text());
        line += '\n';
        const bool written = write_all(stdin_fd, line);
        explicit_bzero(line.data(), line.size());
        close(stdin_fd);
        if (!written) g_warning("could not write the login secret to espvpn's stdin: %s", std::strerror(errno));
    }

    NMSettingSecretFlags flags = NM_SETTING_SECRET_FLAG_NONE;
    nm_setting_get_secret_flags(NM_SETTING(vpn), "password", &flags, nullptr);
    st.password_from_user = !has_secret(settings_of(vpn), "cookie") &&
                            (flags & (NM_SETTING_SECRET_FLAG_AGENT_OWNED | NM_SETTING_SECRET_FLAG_NOT_SAVED));
    st.child = pid;
    st.stop_requested = false;
    st.first_error.clear();
    st.stderr_partial.clear();
    fcntl(stderr_fd, F_SETFL, fcntl(stderr_fd, F_GETFL) | O_NONBLOCK);
    fcntl(stderr_fd, F_SETFD, FD_CLOEXEC);
    st.stderr_fd = stderr_fd;
    st.stderr_watch = g_unix_fd_add(stderr_fd, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR), on_stderr,
                                    plugin);
    st.child_watch = g_child_watch_add(pid, on_child_exit, plugin);
    return TRUE;
}

gboolean plugin_connect(NMVpnServicePlugin* plugin, NMConnection* connection, GError** error) {
    PluginState& st = state_of(plugin);
    st.interactive = false;
    st.password_retries = 0;
    return start_espvpn(plugin, connection, error);
}

gboolean plugin_connect_interactive(NMVpnServicePlugin* plugin, NMConnection* connection, GVariant*,
                                    GError** error) {
    PluginState& st = state_of(plugin);
    st.interactive = true;
    st.password_retries = 0;
    return start_espvpn(plugin, connection, error);
}

// The secrets asked for (SecretsRequired): the answer to the prompt espvpn waits on, or
// after a rejected password, a new login.
gboolean plugin_new_secrets(NMVpnServicePlugin* plugin, NMConnection* connection, GError** error) {
    PluginState& st = state_of(plugin);
    if (st.prompts && st.prompts->waiting_for_user() && st.child > 0) {
        NMSettingVpn* vpn = vpn_setting_of(connection, NM_VPN_PLUGIN_ERROR_BAD_ARGUMENTS, error);
        if (!vpn) return FALSE;
        const auto settings = settings_of(vpn);
        if (!st.prompts->has_answer(settings) && has_secret(settings, "cookie")) {
            // A desktop agent's login window logged in anew (it asks a round in its window, not
            // in the agent's prompt): its cookie replaces this login.
            g_message("the agent's login window logged in: connecting with its cookie");
            st.prompts.reset();
            send_step(st, plugin, PromptStep{PromptStep::Kind::cancel, {}, {}, {}});
            st.stop_requested = true;
            st.kill_timer = g_timeout_add_seconds(kLogoutGraceSeconds, kill_child, plugin);
            g_object_ref(connection);
            st.on_child_gone = [plugin, connection] {
                GError* err = nullptr;
                if (!start_espvpn(plugin, connection, &err)) {
                    g_warning("espvpn not started: %s", err ? err->message : "?");
                    g_clear_error(&err);
                    nm_vpn_service_plugin_failure(plugin, NM_VPN_PLUGIN_FAILURE_CONNECT_FAILED);
                }
                g_object_unref(connection);
            };
            return TRUE;
        }
        send_step(st, plugin, st.prompts->answer_from(settings));
        return TRUE;
    }
    return start_espvpn(plugin, connection, error);
}

gboolean plugin_need_secrets(NMVpnServicePlugin*, NMConnection* connection, const char** setting_name,
                             GError** error) {
    NMSettingVpn* vpn = vpn_setting_of(connection, NM_VPN_PLUGIN_ERROR_INVALID_CONNECTION, error);
    if (!vpn) return FALSE;
    const auto settings = settings_of(vpn);
    // An otp=yes profile's one-time code is never kept: asked at every password login.
    if (has_secret(settings, "cookie") ||
        (has_login_secret(settings) && (!wants_otp(settings) || has_secret(settings, "otp"))))
        return FALSE;
    *setting_name = NM_SETTING_VPN_SETTING_NAME;
    return TRUE;
}

// The Failure signal, sent on the plugin's own connection (the one owning the bus name).
void emit_failure_signal(NMVpnServicePlugin* plugin, NMVpnPluginFailure reason) {
    GDBusConnection* bus = nm_vpn_service_plugin_get_connection(plugin);
    if (!bus) return;
    GError* error = nullptr;
    if (!g_dbus_connection_emit_signal(bus, nullptr, NM_VPN_DBUS_PLUGIN_PATH, NM_VPN_DBUS_PLUGIN_INTERFACE, "Failure",
                                       g_variant_new("(u)", static_cast<guint32>(reason)), &error)) {
        g_warning("could not signal the failure: %s", error->message);
        g_error_free(error);
    }
    g_object_unref(bus);
}

// SIGINT = logout, then the disconnect script; SIGKILL if that takes too long.
gboolean plugin_disconnect(NMVpnServicePlugin* plugin, GError**) {
    PluginState& st = state_of(plugin);
    // libnm's nm_vpn_service_plugin_failure() stops a starting connection through
    // nm_vpn_service_plugin_disconnect(), which signals Failure(CONNECT_FAILED) after
    // our reason; NetworkManager keeps the last one before StateChanged(stopped) and
    // reports a login failure as "Unknown reason". This runs between the two: our
    // reason, once more, is the last.
    if (st.final_failure) {
        emit_failure_signal(plugin, *st.final_failure);
        st.final_failure.reset();
    }
    if (st.child <= 0 || st.stop_requested) return TRUE;
    st.stop_requested = true;
    if (kill(st.child, SIGINT) == 0) {
        g_message("stopping espvpn (pid %d): SIGINT (logout)", st.child);
        st.kill_timer = g_timeout_add_seconds(kLogoutGraceSeconds, kill_child, plugin);
    } else {
        kill(st.child, SIGKILL);
    }
    return TRUE;
}

}  // namespace
}  // namespace espvpn::nm

static void espvpn_nm_plugin_init(EspvpnNmPlugin* self) { self->state = new espvpn::nm::PluginState(); }

static void espvpn_nm_plugin_finalize(GObject* object) {
    auto* self = reinterpret_cast<EspvpnNmPlugin*>(object);
    // Normally the child is gone by now (main waits for it); never leave a watch
    // pointing at a freed object, nor an espvpn without its service.
    if (self->state->child_watch) g_source_remove(self->state->child_watch);
    if (self->state->stderr_watch) g_source_remove(self->state->stderr_watch);
    if (self->state->stderr_fd >= 0) close(self->state->stderr_fd);
    espvpn::nm::close_prompts(*self->state);
    if (self->state->kill_timer) g_source_remove(self->state->kill_timer);
    if (self->state->child > 0) kill(self->state->child, SIGKILL);
    delete self->state;
    self->state = nullptr;
    G_OBJECT_CLASS(espvpn_nm_plugin_parent_class)->finalize(object);
}

static void espvpn_nm_plugin_class_init(EspvpnNmPluginClass* klass) {
    G_OBJECT_CLASS(klass)->finalize = espvpn_nm_plugin_finalize;
    auto* vpn = NM_VPN_SERVICE_PLUGIN_CLASS(klass);
    vpn->connect = espvpn::nm::plugin_connect;
    vpn->connect_interactive = espvpn::nm::plugin_connect_interactive;
    vpn->new_secrets = espvpn::nm::plugin_new_secrets;
    vpn->need_secrets = espvpn::nm::plugin_need_secrets;
    vpn->disconnect = espvpn::nm::plugin_disconnect;
}

namespace espvpn::nm {

NMVpnServicePlugin* create_espvpn_plugin(const PluginOptions& options, GError** error) {
    // The state must hold the options before init_sync exports the object.
    auto* object = g_object_new(espvpn_nm_plugin_get_type(), NM_VPN_SERVICE_PLUGIN_DBUS_SERVICE_NAME,
                                options.bus_name.c_str(), NM_VPN_SERVICE_PLUGIN_DBUS_WATCH_PEER,
                                options.watch_peer ? TRUE : FALSE, nullptr);
    state_of(object).options = options;
    if (!g_initable_init(G_INITABLE(object), nullptr, error)) {
        g_object_unref(object);
        return nullptr;
    }
    return NM_VPN_SERVICE_PLUGIN(object);
}

bool espvpn_child_running(NMVpnServicePlugin* plugin) { return state_of(plugin).child > 0; }

void on_espvpn_child_gone(NMVpnServicePlugin* plugin, std::function<void()> callback) {
    state_of(plugin).on_child_gone = std::move(callback);
}

}  // namespace espvpn::nm
