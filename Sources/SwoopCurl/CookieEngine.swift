import CCurl
import SwoopCore

/// The downloader's cookies: one libcurl share handle holding the cookie store that every
/// exchange of the ``TransferLoop`` uses, loaded once from a file and, when the loop stops, saved
/// to a jar (`Configuration.access.cookies`). libcurl's cookie
/// engine sends each cookie only to the domain and path it names. Transfer thread only.
package final class CookieEngine {
    private let share: UnsafeMutableRawPointer
    private let jar: String?

    /// An engine reading `file` and saving to `jar`; `nil` when neither is given.
    package init?(file: String?, jar: String?) {
        guard file != nil || jar != nil, let share = curl_share_init() else { return nil }
        self.share = share
        self.jar = jar
        _ = swoop_share_setopt_lock_data(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE)
        if let file, let easy = CurlEasy() {
            // Into the shared store now, once: exchanges only switch the engine on.
            attach(easy)
            easy.set(CURLOPT_COOKIEFILE, file)
            easy.set(CURLOPT_COOKIELIST, "RELOAD")
            detach(easy)
        }
    }

    deinit {
        curl_share_cleanup(share)
    }

    /// Makes `easy` send and keep cookies in the shared store. `curl_easy_reset` keeps a share,
    /// so every exchange of a loop with cookies sets it again and a handle never holds another.
    package func attach(_ easy: CurlEasy) {
        easy.set(CURLOPT_SHARE, pointer: share)
        easy.set(CURLOPT_COOKIEFILE, "")  // "": the engine on, no file read
    }

    /// Writes every cookie to the jar, if there is one, before the loop's handles go.
    package func save() {
        guard let jar, let easy = CurlEasy() else { return }
        attach(easy)
        easy.set(CURLOPT_COOKIEJAR, jar)
        easy.set(CURLOPT_COOKIELIST, "FLUSH")
        easy.set(CURLOPT_COOKIEJAR, pointer: nil)  // written; not again at cleanup
        detach(easy)
    }

    private func detach(_ easy: CurlEasy) {
        easy.set(CURLOPT_SHARE, pointer: nil)
    }
}
