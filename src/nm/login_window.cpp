#include "src/nm/login_window.h"

#include <fcntl.h>
#include <glib-unix.h>
#include <gtk/gtk.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "protocols/base/exec_array.h"
#include "protocols/prompt/prompt_channel.h"
#include "src/nm/write_all.h"

extern char** environ;

namespace espvpn::nm {

namespace {

constexpr std::size_t kMaxStderr = 256 * 1024;

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void clear_box(GtkWidget* box) {
    while (GtkWidget* child = gtk_widget_get_first_child(box)) gtk_box_remove(GTK_BOX(box), child);
}

// A label for server text: plain (no markup), wrapped, left-aligned.
GtkWidget* plain_label(const std::string& text) {
    GtkWidget* l = gtk_label_new(nullptr);
    gtk_label_set_use_markup(GTK_LABEL(l), FALSE);
    gtk_label_set_text(GTK_LABEL(l), text.c_str());
    gtk_label_set_wrap(GTK_LABEL(l), TRUE);
    gtk_label_set_xalign(GTK_LABEL(l), 0.0f);
    gtk_label_set_max_width_chars(GTK_LABEL(l), 60);
    return l;
}

class Window {
public:
    Window(const LoginWindowOptions& o, LoginFlow& flow) : o_(o), flow_(flow) {}
    ~Window() {
        if (kill_timer_) g_source_remove(kill_timer_);
        stop_sources();
        if (!out_.empty()) explicit_bzero(out_.data(), out_.size());
    }

    Result<std::map<std::string, Secret>> run() {
        build();
        start_run();
        while (!finished_) g_main_context_iteration(nullptr, TRUE);
        gtk_window_destroy(GTK_WINDOW(window_));
        while (g_main_context_pending(nullptr)) g_main_context_iteration(nullptr, FALSE);
        if (!result_) return make_error(error_.empty() ? std::string("the login was cancelled") : error_);
        return std::move(*result_);
    }

private:
    // --- the window ---------------------------------------------------------
    void build() {
        window_ = gtk_window_new();
        gtk_window_set_title(GTK_WINDOW(window_), ("VPN login: " + o_.connection_name).c_str());
        gtk_window_set_resizable(GTK_WINDOW(window_), TRUE);
        GtkWidget* box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 12);
        gtk_widget_set_margin_top(box, 18);
        gtk_widget_set_margin_bottom(box, 18);
        gtk_widget_set_margin_start(box, 18);
        gtk_widget_set_margin_end(box, 18);
        gtk_window_set_child(GTK_WINDOW(window_), box);

        heading_ = plain_label("Log in to the VPN \u201c" + o_.connection_name + "\u201d");
        gtk_widget_add_css_class(heading_, "title-4");
        gtk_box_append(GTK_BOX(box), heading_);
        if (!o_.gateway.empty()) {
            GtkWidget* server = plain_label(o_.gateway);
            gtk_widget_add_css_class(server, "dim-label");
            gtk_box_append(GTK_BOX(box), server);
        }
        // The server's messages; an error gets the theme's error icon beside text in the
        // normal colour: the theme's error red on Adwaita's dark background is hard to read
        // (#cc0000 on #353535), and colour alone would be the only cue.
        message_box_ = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
        message_icon_ = gtk_image_new_from_icon_name("dialog-error-symbolic");
        gtk_widget_add_css_class(message_icon_, "error");
        gtk_widget_set_valign(message_icon_, GTK_ALIGN_START);
        gtk_box_append(GTK_BOX(message_box_), message_icon_);
        message_ = plain_label("");
        gtk_widget_set_hexpand(message_, TRUE);
        gtk_box_append(GTK_BOX(message_box_), message_);
        gtk_widget_set_visible(message_box_, FALSE);
        gtk_box_append(GTK_BOX(box), message_box_);

        status_box_ = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 12);
        spinner_ = gtk_spinner_new();
        gtk_box_append(GTK_BOX(status_box_), spinner_);
        status_ = plain_label("");
        gtk_widget_set_hexpand(status_, TRUE);
        gtk_box_append(GTK_BOX(status_box_), status_);
        gtk_box_append(GTK_BOX(box), status_box_);

        form_ = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
        gtk_box_append(GTK_BOX(box), form_);

        GtkWidget* buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
        gtk_widget_set_halign(buttons, GTK_ALIGN_END);
        gtk_widget_set_valign(buttons, GTK_ALIGN_END);
        gtk_widget_set_vexpand(buttons, TRUE);
        cancel_ = gtk_button_new_with_mnemonic("_Cancel");
        gtk_accessible_update_property(GTK_ACCESSIBLE(cancel_), GTK_ACCESSIBLE_PROPERTY_LABEL, "Cancel", -1);
        ok_ = gtk_button_new();
        set_ok_label("_Log In");
        gtk_widget_add_css_class(ok_, "suggested-action");
        gtk_box_append(GTK_BOX(buttons), cancel_);
        gtk_box_append(GTK_BOX(buttons), ok_);
        gtk_box_append(GTK_BOX(box), buttons);
        gtk_window_set_default_widget(GTK_WINDOW(window_), ok_);
        g_signal_connect_swapped(ok_, "clicked", G_CALLBACK(+[](Window* w) { w->submit(); }), this);
        g_signal_connect_swapped(cancel_, "clicked", G_CALLBACK(+[](Window* w) { w->cancel(); }), this);
        g_signal_connect_swapped(window_, "close-request", G_CALLBACK(+[](Window* w) -> gboolean {
                                     w->cancel();
                                     return TRUE;
                                 }),
                                 this);

        // Escape cancels; Enter on the drop-down submits (Space opens its list).
        GtkEventController* shortcuts = gtk_shortcut_controller_new();
        gtk_shortcut_controller_add_shortcut(
            GTK_SHORTCUT_CONTROLLER(shortcuts),
            gtk_shortcut_new(gtk_shortcut_trigger_parse_string("Escape"),
                             gtk_callback_action_new(
                                 +[](GtkWidget*, GVariant*, gpointer w) -> gboolean {
                                     static_cast<Window*>(w)->cancel();
                                     return TRUE;
                                 },
                                 this, nullptr)));
        gtk_widget_add_controller(window_, shortcuts);
        GtkEventController* keys = gtk_event_controller_key_new();
        gtk_event_controller_set_propagation_phase(keys, GTK_PHASE_CAPTURE);
        g_signal_connect(keys, "key-pressed",
                         G_CALLBACK(+[](GtkEventControllerKey*, guint keyval, guint, GdkModifierType, gpointer p) -> gboolean {
                             auto* w = static_cast<Window*>(p);
                             if (keyval != GDK_KEY_Return && keyval != GDK_KEY_KP_Enter) return FALSE;
                             if (!w->input_ || !GTK_IS_DROP_DOWN(w->input_)) return FALSE;
                             GtkWidget* focus = gtk_root_get_focus(GTK_ROOT(w->window_));
                             if (!focus || (focus != w->input_ && !gtk_widget_is_ancestor(focus, w->input_)))
                                 return FALSE;
                             w->submit();
                             return TRUE;
                         }),
                         this);
        gtk_widget_add_controller(window_, keys);
        gtk_window_present(GTK_WINDOW(window_));
    }

    // The main button's text with its mnemonic; screen readers get it without the underscore.
    void set_ok_label(const char* mnemonic) {
        gtk_button_set_label(GTK_BUTTON(ok_), mnemonic);
        gtk_button_set_use_underline(GTK_BUTTON(ok_), TRUE);
        std::string plain;
        for (const char* c = mnemonic; *c; ++c)
            if (*c != '_') plain += *c;
        gtk_accessible_update_property(GTK_ACCESSIBLE(ok_), GTK_ACCESSIBLE_PROPERTY_LABEL, plain.c_str(), -1);
    }

    void set_message(const std::string& text, bool error) {
        gtk_label_set_text(GTK_LABEL(message_), text.c_str());
        gtk_widget_set_visible(message_icon_, error);
        gtk_widget_set_visible(message_box_, !text.empty());
    }

    void show_working() {
        clear_box(form_);
        input_ = nullptr;
        pending_.reset();
        gtk_label_set_text(GTK_LABEL(status_), o_.single_sign_on
                                                   ? "Continue the login in your web browser. This window closes "
                                                     "when it is done."
                                                   : "Connecting\u2026");
        gtk_widget_set_visible(status_box_, TRUE);
        gtk_spinner_start(GTK_SPINNER(spinner_));
        gtk_widget_set_visible(ok_, FALSE);
        gtk_widget_grab_focus(cancel_);
    }

    void show_form(const prompt::Record& r) {
        gtk_spinner_stop(GTK_SPINNER(spinner_));
        gtk_widget_set_visible(status_box_, FALSE);
        clear_box(form_);
        pending_ = r;
        if (r.type == prompt::RecordType::banner) {
            gtk_box_append(GTK_BOX(form_), plain_label(r.text));
            set_ok_label("_Accept");
            input_ = nullptr;
        } else {
            const std::string label = r.label.empty() ? r.name : r.label;
            GtkWidget* caption = plain_label(label);
            gtk_box_append(GTK_BOX(form_), caption);
            if (r.kind == prompt::FieldKind::select) {
                std::vector<const char*> strings;
                for (const auto& c : r.choices) strings.push_back(c.c_str());
                strings.push_back(nullptr);
                input_ = gtk_drop_down_new_from_strings(strings.data());
            } else if (r.kind == prompt::FieldKind::password) {
                input_ = gtk_password_entry_new();
                gtk_editable_set_width_chars(GTK_EDITABLE(input_), 32);
                gtk_password_entry_set_show_peek_icon(GTK_PASSWORD_ENTRY(input_), TRUE);
            } else {
                input_ = gtk_entry_new();
                gtk_editable_set_width_chars(GTK_EDITABLE(input_), 32);
            }
            if (!GTK_IS_DROP_DOWN(input_))  // Enter in the field submits
                g_signal_connect_swapped(input_, "activate", G_CALLBACK(+[](Window* w) { w->submit(); }), this);
            gtk_accessible_update_property(GTK_ACCESSIBLE(input_), GTK_ACCESSIBLE_PROPERTY_LABEL, label.c_str(), -1);
            gtk_box_append(GTK_BOX(form_), input_);
            set_ok_label("_Log In");
        }
        gtk_widget_set_visible(ok_, TRUE);
        gtk_widget_grab_focus(input_ ? input_ : ok_);
    }

    void show_failure(const std::string& text, bool retry) {
        gtk_spinner_stop(GTK_SPINNER(spinner_));
        gtk_widget_set_visible(status_box_, FALSE);
        clear_box(form_);
        input_ = nullptr;
        pending_.reset();
        set_message(text, true);
        retry_ = retry;
        set_ok_label("_Try Again");
        gtk_widget_set_visible(ok_, retry);
        gtk_widget_grab_focus(retry ? ok_ : cancel_);
    }

    // --- the user ----------------------------------------------------------
    void submit() {
        if (!pending_) {
            if (retry_ && pid_ < 0) {
                retry_ = false;
                set_message("", false);
                start_run();
            }
            return;
        }
        Secret value;
        if (pending_->type == prompt::RecordType::ask) {
            if (GTK_IS_DROP_DOWN(input_)) {
                const guint i = gtk_drop_down_get_selected(GTK_DROP_DOWN(input_));
                if (i >= pending_->choices.size()) return;
                value = Secret::from_string(pending_->choices[i]);
            } else {
                value = Secret::from_string(gtk_editable_get_text(GTK_EDITABLE(input_)));
                gtk_editable_set_text(GTK_EDITABLE(input_), "");
            }
            flow_.answered(*pending_, value);
        }
        set_message("", false);
        answer(value);
        show_working();
    }

    void answer(const Secret& value) {
        auto line = prompt::encode_answer(value);
        if (!line) {
            show_failure(line.error().message, false);
            return;
        }
        write_all(chan_, line->reveal_text());
    }

    void cancel() {
        if (pid_ > 0) {
            cancelled_ = true;
            if (chan_ >= 0) write_all(chan_, std::string(prompt::kCancel) + "\n");
            ::kill(pid_, SIGTERM);  // the run ends in on_exit; SIGKILL if it lingers 3 s
            if (!kill_timer_)
                kill_timer_ = g_timeout_add_seconds(3, +[](gpointer p) -> gboolean {
                    auto* w = static_cast<Window*>(p);
                    w->kill_timer_ = 0;
                    if (w->pid_ > 0) ::kill(w->pid_, SIGKILL);
                    return G_SOURCE_REMOVE;
                }, this);
            return;
        }
        finished_ = true;
    }

    // --- espvpn --authenticate ---------------------------------------------
    void start_run() {
        flow_.start_run();
        stop_sources();
        int sock[2], out[2], err[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
            ::pipe2(err, O_CLOEXEC) != 0) {
            show_failure(std::string("cannot start espvpn: ") + std::strerror(errno), false);
            return;
        }
        std::vector<std::string> args = o_.argv;
        auto at = args.begin() + 1;
        for (; at != args.end(); ++at)
            if (*at == "--authenticate") break;
        args.insert(at, "--prompt-fd=3");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        // dup2 onto 3 clears close-on-exec, unless the socket already is 3: then move it.
        int child = sock[1];
        if (child == 3) {
            child = ::fcntl(sock[1], F_DUPFD_CLOEXEC, 4);
            ::close(sock[1]);
            sock[1] = child;
        }
        posix_spawn_file_actions_adddup2(&fa, child, 3);
        std::vector<char*> argv = exec_array(args);
        pid_t pid = -1;
        const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        ::close(sock[1]);
        ::close(out[1]);
        ::close(err[1]);
        if (rc != 0) {
            ::close(sock[0]);
            ::close(out[0]);
            ::close(err[0]);
            show_failure("cannot run " + args[0] + ": " + std::strerror(rc), false);
            return;
        }
        pid_ = pid;
        cancelled_ = false;
        chan_ = sock[0];
        out_fd_ = out[0];
        err_fd_ = err[0];
        set_nonblocking(chan_);
        set_nonblocking(out_fd_);
        set_nonblocking(err_fd_);
        chan_buf_.clear();
        err_.clear();
        if (!out_.empty()) explicit_bzero(out_.data(), out_.size());
        out_.clear();
        chan_src_ = g_unix_fd_add(chan_, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR),
                                  +[](int, GIOCondition, gpointer w) -> gboolean {
                                      return static_cast<Window*>(w)->read_channel();
                                  },
                                  this);
        out_src_ = g_unix_fd_add(out_fd_, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR),
                                 +[](int, GIOCondition, gpointer w) -> gboolean {
                                     return static_cast<Window*>(w)->read_output(false);
                                 },
                                 this);
        err_src_ = g_unix_fd_add(err_fd_, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR),
                                 +[](int, GIOCondition, gpointer w) -> gboolean {
                                     return static_cast<Window*>(w)->read_errors(false);
                                 },
                                 this);
        g_child_watch_add(pid_, +[](GPid, gint status, gpointer w) { static_cast<Window*>(w)->on_exit(status); }, this);
        show_working();
    }

    gboolean read_channel() {
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(chan_, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return G_SOURCE_CONTINUE;
            if (n <= 0) {
                chan_src_ = 0;
                return G_SOURCE_REMOVE;
            }
            chan_buf_.append(buf, static_cast<std::size_t>(n));
            std::size_t nl;
            while ((nl = chan_buf_.find('\n')) != std::string::npos) {
                std::string line = chan_buf_.substr(0, nl);
                chan_buf_.erase(0, nl + 1);
                auto record = prompt::decode(line);
                if (!record) return protocol_error(record.error().message);
                on_record(*record);
            }
            if (chan_buf_.size() > prompt::kMaxLine) return protocol_error("a prompt record longer than 64 KiB");
        }
    }

    gboolean protocol_error(const std::string& what) {
        error_ = "espvpn's prompt channel: " + what;
        std::fprintf(stderr, "nm-espvpn-auth-dialog: %s\n", error_.c_str());
        if (pid_ > 0) ::kill(pid_, SIGTERM);
        chan_src_ = 0;
        return G_SOURCE_REMOVE;
    }

    void on_record(const prompt::Record& r) {
        switch (r.type) {
            case prompt::RecordType::message: set_message(r.text, false); break;
            case prompt::RecordType::error: set_message(r.text, true); break;
            case prompt::RecordType::banner: show_form(r); break;
            case prompt::RecordType::ask:
                if (const Secret* stored = flow_.automatic_answer(r)) {
                    answer(*stored);
                    break;
                }
                show_form(r);
                break;
        }
    }

    gboolean read_output(bool drain) {
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(out_fd_, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN && !drain) return G_SOURCE_CONTINUE;
            if (n <= 0) {
                explicit_bzero(buf, sizeof buf);
                if (!drain) out_src_ = 0;
                return G_SOURCE_REMOVE;
            }
            out_.append(buf, static_cast<std::size_t>(n));
            explicit_bzero(buf, sizeof buf);
        }
    }

    // espvpn's progress and errors: relayed to our stderr (NetworkManager's client log),
    // the tail kept for the failure message.
    gboolean read_errors(bool drain) {
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(err_fd_, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN && !drain) return G_SOURCE_CONTINUE;
            if (n <= 0) {
                if (!drain) err_src_ = 0;
                return G_SOURCE_REMOVE;
            }
            write_all(2, std::string_view(buf, static_cast<std::size_t>(n)));
            err_.append(buf, static_cast<std::size_t>(n));
            if (err_.size() > kMaxStderr) err_.erase(0, err_.size() - kMaxStderr);
        }
    }

    void on_exit(int status) {
        pid_ = -1;
        if (out_fd_ >= 0) read_output(true);
        if (err_fd_ >= 0) read_errors(true);
        stop_sources();
        if (cancelled_) {
            finished_ = true;
            return;
        }
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == 0) {
            auto secrets = flow_.secrets(out_);
            explicit_bzero(out_.data(), out_.size());
            out_.clear();
            if (secrets) {
                result_ = std::move(*secrets);
                finished_ = true;
                return;
            }
            show_failure(secrets.error().message, true);
            return;
        }
        std::string why = error_.empty() ? failure_text(err_) : error_;
        if (why.empty()) why = "espvpn exited with status " + std::to_string(code);
        error_ = why;
        // Credentials refused (exit 2): asked again at once, with the server's word.
        if (code == 2 && flow_.runs() < 3) {
            error_.clear();
            start_run();
            set_message(why, true);
            return;
        }
        show_failure(why, code != 2);
    }

    void stop_sources() {
        for (guint* src : {&chan_src_, &out_src_, &err_src_})
            if (*src) {
                g_source_remove(*src);
                *src = 0;
            }
        for (int* fd : {&chan_, &out_fd_, &err_fd_})
            if (*fd >= 0) {
                ::close(*fd);
                *fd = -1;
            }
    }

    const LoginWindowOptions& o_;
    LoginFlow& flow_;
    GtkWidget *message_box_ = nullptr, *message_icon_ = nullptr;
    GtkWidget *window_ = nullptr, *heading_ = nullptr, *message_ = nullptr, *status_box_ = nullptr,
              *spinner_ = nullptr, *status_ = nullptr, *form_ = nullptr, *ok_ = nullptr, *cancel_ = nullptr;
    GtkWidget* input_ = nullptr;
    std::optional<prompt::Record> pending_;
    bool retry_ = false, cancelled_ = false, finished_ = false;
    pid_t pid_ = -1;
    int chan_ = -1, out_fd_ = -1, err_fd_ = -1;
    guint chan_src_ = 0, out_src_ = 0, err_src_ = 0, kill_timer_ = 0;
    std::string chan_buf_, out_, err_, error_;
    std::optional<std::map<std::string, Secret>> result_;
};

}  // namespace

bool login_window_available() {
    g_set_prgname("nm-espvpn-auth-dialog");  // the application's name for the desktop and AT-SPI
    g_set_application_name("VPN login");
    return gtk_init_check();
}

Result<std::map<std::string, Secret>> run_login_window(const LoginWindowOptions& options, LoginFlow& flow) {
    ::signal(SIGPIPE, SIG_IGN);  // espvpn gone: a failed write, not a dead dialog
    Window w(options, flow);
    return w.run();
}

}  // namespace espvpn::nm
