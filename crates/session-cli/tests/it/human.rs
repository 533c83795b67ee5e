//! Snapshots of what the `session` command prints for a person (`--text`, 80 columns,
//! no colour) on the bundled sample sessions of both agents. Refresh them with
//! `UPDATE_EXPECT=1 cargo test -p session-cli --test it human`, then read the diff.

use std::path::Path;

use expect_test::expect;

use crate::{Result, TempDir, bin};

/// The sample session of `agent`, copied into `dir` (so that printed paths are the
/// copy's, made stable below).
fn sample(dir: &Path, agent: &str) -> Result<std::path::PathBuf> {
    let bucket = dir.join("sessions").join("--home-user-project--");
    fs_err::create_dir_all(&bucket)?;
    let file = bucket.join(format!("2026-01-01T00-00-00-000Z_{agent}.jsonl"));
    fs_err::copy(session_testkit::testdata().join(format!("sample/{agent}.jsonl")), &file)?;
    // A fixed modification time: omp lists by it.
    let f = fs_err::OpenOptions::new().append(true).open(&file)?;
    f.file().set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_767_225_600_000))?;
    Ok(file)
}

/// Runs `session --text ARGS` at 80 columns and returns its output, the temporary
/// directory written as `<tmp>`.
fn text(dir: &Path, args: &[&str]) -> Result<String> {
    let out = bin(dir)
        .arg("--text")
        .args(args)
        .env("COLUMNS", "80")
        .env("NO_COLOR", "1")
        .env("HOME", dir.join("home"))
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("XDG_STATE_HOME")
        .output()?;
    let mut s = String::from_utf8(out.stdout)?;
    if !out.status.success() {
        s.push_str(&format!("[exit {}] {}", out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(s.replace(&dir.to_string_lossy().into_owned(), "<tmp>"))
}

#[test]
fn info_prints_aligned_fields() -> Result<()> {
    let tmp = TempDir::try_new("human-info")?;
    let pi = sample(tmp.path(), "pi")?;
    let omp = sample(tmp.path(), "omp")?;
    expect![[r#"
        file           <tmp>/sessions/--home-user-project--/2026-01-01T00-00-00-000Z_pi.jsonl
        agent          pi
        id             019b76da-a800-7dc3-a765-d6cba1d4622c
        name           value write append file grep
        cwd            /home/user/project
        created        2026-01-01T00:00:00.000Z
        version        3
        entries        40
        branch         16 entries to the leaf
        leaf           7e9d34fd
    "#]]
    .assert_eq(&text(tmp.path(), &["info", &pi.to_string_lossy()])?);
    expect![[r#"
        file           <tmp>/sessions/--home-user-project--/2026-01-01T00-00-00-000Z_omp.jsonl
        agent          omp
        id             019b76da-a800-7d68-8bd3-b97860841230
        name           (none)
        cwd            /home/user/project
        created        2026-01-01T00:00:00.000Z
        version        3
        entries        40
        branch         20 entries to the leaf
        leaf           150b13ed
    "#]]
    .assert_eq(&text(tmp.path(), &["--dialect", "omp", "info", &omp.to_string_lossy()])?);
    Ok(())
}

#[test]
fn tree_marks_the_active_branch_and_shows_labels() -> Result<()> {
    let tmp = TempDir::try_new("human-tree")?;
    let pi = sample(tmp.path(), "pi")?;
    expect![[r#"
        * 0f5597c4 user: value tab quote" bash root root array the entry assistant entr…
        * aa26d799 user: label naïve session find append module cache number user entry…
        * 4b07a5d9 user: write function café path number the fork result cache number t…
        * 70fb223f assistant: context thinking child summary number assistant value 日…
        ├─   50a8a33b user: session string naïve model fork tab quote" backslash\ edit …
        │    bfef5148 user: result 🚀 string function file root backslash\ unic…  [tree]
        │    73689288 compaction: find tree branch token child assistant function paren…
        │    d690a063 session_info: value write append file grep
        │    9e35b2a4 user: assistant tab quote" root read model grep cache context obj…
        │    fd0d7011 custom_message (notice)
        │    b0bf538f custom (ext-state)
        │    08cc2e6f assistant: path user module tool token naïve append label assista…
        │    8a09fc59 user: prompt leaf value tree module assistant parent 日本語 tab q…
        │    32c8f080 thinking_level_change
        │    f8d4e768 assistant: tree string string object grep edit prompt function er…
        │    aa3cad0f assistant: model context error string token branch tool café tab …
        │    dff72980 toolResult: build newline find value label path pat…  [naïve bash]
        │    aebec349 label dff72980 = naïve bash
        │    d37d799f label bfef5148 = tree
        │    4a5c8be1 assistant: model edit summary thinking summary child root user ap…
        │    d908ecf2 toolResult: naïve fix build error token unicode naïve child leaf …
        │    0e0fce42 assistant: cache number naïve parent compaction result value café…
        │    98fc8f95 user: bash tree read unicode context model tab quote" the token s…
        │    26cc0a41 assistant: leaf grep the the thinking module find bash grep modul…
        │    87843e20 toolResult: path entry model refactor fix path the bash entry con…
        │    9dd2d518 thinking_level_change
        │    17b988d1 assistant: user path edit model append edit leaf label result str…
        │    5dfb3ff7 assistant: fork branch test model tree build cache result file pr…
        └─ * 23594136 user: append 日本語 root refactor find test entry label session r…
           * fc6b0af6 assistant: leaf build naïve error find append child prompt edit r…
           * 21d30e34 toolResult: function read cache tree refactor leaf string 日本語 …
           * a8e58498 assistant: 日本語 unicode cache test model summary tab quote" rea…
           * 0563fb0b toolResult: label root context model parent label path find token…
           * ac81ef66 assistant: array newline backslash\ user path number parent summa…
           * 2c7f5160 assistant: unicode cache model tree entry value build model entry…
           * 4eb967a9 toolResult: fix naïve compaction café module session café 🚀 user…
           * 955abfd4 assistant: parent fix path write refactor 🚀 read emoji object ro…
           * 9a1813b2 assistant: grep fix string summary emoji test tab quote" the unic…
           * 033f88f5 user: context parent leaf tree tool file label tool result naïve …
           * 7e9d34fd assistant: assistant bash newline tab quote" compaction the fork …
    "#]]
    .assert_eq(&text(tmp.path(), &["tree", &pi.to_string_lossy()])?);
    Ok(())
}

#[test]
fn entries_print_one_line_each() -> Result<()> {
    let tmp = TempDir::try_new("human-entries")?;
    let omp = sample(tmp.path(), "omp")?;
    expect![[r#"
        576d228b   user: append emoji number branch 日本語 tool bash test child append …
        7feae32a   assistant: grep assistant cache 🚀 café prompt café array refactor b…
        4d2a0a05   toolResult: grep value array assistant parent tree model model refac…
        0541d451   assistant: 日本語 module user array entry value path append write ca…
        681a2892   toolResult: user child edit emoji label fi
        9ef2fc9e   assistant: result emoji naïve write naïve emoji find function number…
        6e163bc7   assistant: assistant session prompt array bash tool value array obje…
        ce68e900   assistant: backslash\ unicode summary array thinking bash prompt use…
        37a3584a   user: number string cache leaf grep parent leaf thinking bash leaf n…
        b545b805   assistant: refactor build fix compaction cache child token tab quote…
        cf66951f   toolResult: root bash test backslash\ read summary backslash\ functi…
        426fd40f   user: summary newline cache assistant error session tool thinking er…
        8626681d   assistant: tool tab quote" grep model summary model naïve string ent…
        f4294afd   toolResult: prompt fix tab quote" build grep append newline fix comp…
        da97cd16   assistant: café compaction branch parent cache string edit grep back…
        1700bbdb   user: find build file find the object token leaf result write token …
        de282825   custom_message (notice)
        6dee0fb3   assistant: append newline append café prompt café 🚀 append tab quot…
        1bf6dde6   toolResult: edit array newline file file build branch emoji emoji tr…
        f04fee56   ttsr_injection
        beb3d553   user: session number write bash function compaction unicode naïve 日…
        bdf0b9ba   assistant: array unicode write leaf child refactor 日本語 build tool…
        841acfcf   toolResult: tool write child user write error summary refactor value…
        7e466a74   assistant: emoji number 🚀 cache find model leaf function edit file …
        f1158a12   toolResult: edit user user the 🚀 read grep tab quote" fix 🚀 bash f…
        f6ec8895   assistant: string context number 🚀 value test token entry path emoj…
        1f660492   custom (ext-state)
        5d1ad87a   assistant: module fix tool summary file assistant entry café result …
        7d03a922   toolResult: tab quote" user write append refactor entry read error f…
        1bb6c98d   user: unicode parent assistant module array cache file refactor cont…
        e94bf04c   user: module summary test child module child 日本語 🚀 refactor cont…
        1905802f   user: string path entry path test label refactor assistant assistant…
        03cc3589   model_change: google/gemini-2.5-pro
        9211d046   service_tier_change
        66e2311a   user: path fork path branch model array emoji edit fork function thi…
        90d69d46   user: number refactor child prompt error number tab quote" newline t…
        1f0aeea6   assistant: module café thinking tool the array unicode number find e…
        a8770b78   user: unicode file number summary refactor error thinking thinking p…
        e5650358   user: café compaction module thinking thinking cache module naïve ca…
        150b13ed   user: compaction root build cache compaction token model root 🚀 rea…
        40 entries
    "#]]
    .assert_eq(&text(tmp.path(), &["--dialect", "omp", "entries", &omp.to_string_lossy()])?);
    Ok(())
}

#[test]
fn context_and_branch_read_as_a_transcript() -> Result<()> {
    let tmp = TempDir::try_new("human-context")?;
    let pi = sample(tmp.path(), "pi")?;
    let omp = sample(tmp.path(), "omp")?;
    expect![[r#"
        ── user ──
        value tab	quote" bash root root array the entry assistant entry unicode read array cache number prompt tree cache naïve grep emoji function summary branch read branch 🚀
         number function parent root tes
        ── user ──
        label naïve session find append module cache number user entry tree tab	quote
        ── user ──
        write function café path number the fork result cache number thinking token emoji edit file fix 🚀 read result append refactor leaf leaf build fork context child café sessio
        ── assistant ──
        (thinking) context test tool array tree context summary bash unicode tool newline …
        context thinking
         child summary number assistant value 日本語 grep label root label refactor newline object test cache value token thinking object array
         model compaction leaf backslash\ string unicode read root user
         tree edit
         the error number branch assistant grep file branch prompt
        grep build assistant backslash\ naïve read entry unicode leaf label assistant find path prompt backslash\ file thinking café result cache the pare
        ── user ──
        append 日本語 root refactor find test entry label session root label context append the tool
        ── assistant ──
        leaf build naïve error find append child prompt edit refactor build tab	quote" append café test user fork café thinking 日本語 token leaf fix user thinking unicode error object emoji module cache
         find tool
        backslash\ context context string backslash\ fork build 
        → edit {"path":"/tmp/src/file.ts","command":"summary append token"}
        ← edit: function read cache tree refactor leaf string 日本語 read build refactor u…
        ── assistant ──
        (thinking) build fix build newline array prompt newline tree 🚀 path find test entr…
        日本語 unicode cache test model summary tab	quote" read append child tree path the prompt thinking context build context entry fork
         child assistant root path comp
        → bash {"path":"/tmp/src/file.ts","command":"thinking emoji"}
        ← bash: label root context model parent label path find token path café model p…
        ── assistant ──
        (thinking) read prompt fork bash the leaf label bash fork fork fork edit result le…
        array newline backslash\ user
         path number parent summary result branch assistant object branch edit result compaction file model emoji model newline tab	quote" file branch bash array entry fork naïve number model the café tool bash function object 🚀 compaction the bash module
        tool number find module 🚀 newline refactor append café
         refactor branch edit tree error newline cache functio
        ── assistant ──
        (thinking) read the tab quote" model array token compaction function cache string …
        unicode cache model tree entry value build model entry tool prompt fix newline grep prompt read the thinking function parent the newline branch the tree 🚀 root backslash\ grep thinking append module
        error token fork number array thinking value test context object object emoji session module fix value 🚀 cache edit 日本語 context tool cache append function bash naïve
        object 🚀 
        → grep {"path":"/tmp/src/file.ts","command":"fork refactor token thinking"}
        ← grep: fix naïve compaction café module session café 🚀 user read child the app…
        ── assistant ──
        (thinking) session session find find fix newline number child leaf grep write assi…
        parent fix path write refactor 🚀 read emoji object root thinking leaf unicode append 日本語 append fork unicode tool compaction string the branch the thinking cache build session summary emoji number model value summary
         🚀 child fix result root café session naïve
        cache tree token refactor emoji parent result newline bash chil
        ── assistant ──
        (thinking) refactor string label newline file session café model compa
        grep fix string summary emoji test tab	quote" the unicode number result compaction function value 🚀 root find token object branch leaf result session string value child back
        ── user ──
        context parent leaf tree tool file label tool result naïve thinking cache unicode entry tool find backslash\ thinking backslash\ string 日本語
        token newline context path 🚀 café build number
        ── assistant ──
        (thinking) unicode refactor tab quote" build user the 日本語 thinking unicode child f…
        assistant bash newline tab	quote" compaction the fork 日本語 tab	quote" find result edit refactor emoji module grep entry append entry newline context tree path backslash\ root emoji grep result child file session root tree assistant assistant module test summary number
         refactor
         error array
        🚀 fork summary compaction 
        → bash {"path":"/tmp/src/file.ts","command":"🚀 branch label value"}
        16 message(s)
    "#]]
    .assert_eq(&text(tmp.path(), &["context", &pi.to_string_lossy()])?);
    expect![[r#"
        ── user ──
        append emoji number branch 日本語 tool bash test child append write context token array summary compactio
        ── assistant ──
        grep assistant cache 🚀 café prompt café array refactor backslash\ naïve thinking
         token cache value 🚀 label 日本語 module context cache session grep cache grep fix context edit append
        edit unicode model array path string tree label root fork assistant the array file the 🚀 refactor the session model read edit string
        tool path build model cache tree unicode prompt string parent label result bash error tool naïve grep refactor t
        → bash {"path":"/tmp/src/file.ts","command":"user emoji"}
        ← bash: grep value array assistant parent tree model model refactor parent cont…
        ── assistant ──
        日本語 module user array entry value path append write cache thinking root file the
         café naïve number test compaction branch bash tab	quote" function root array build file parent append leaf en
        → bash {"path":"/tmp/src/file.ts","command":"path session"}
        ← bash: user child edit emoji label fi
        ── assistant ──
        result emoji naïve write naïve emoji find function number object child path token user thinking grep tab	quote" function unicode label edit leaf parent thinking leaf fork test append tree
         write newline
         tool num
        ── assistant ──
        (thinking) tab quote" café root prompt 🚀 café branch backslash\ emoji root fix the …
        assistant session prompt array bash tool value array object result context the emoji array café write 日本語 fix read grep newline prompt result array cont
        ── assistant ──
        backslash\ unicode summary array thinking bash prompt user token bash build prompt compaction user grep tree
         assistant path context café unicode entry file emoji summary
         context edit 日本語 read object string compaction array backslash\ thinking compaction build value unicode edit 
        ── user ──
        number string cache
         leaf grep parent leaf thinking bash leaf newline root appen
        ── assistant ──
        (thinking) function p
        refactor build fix compaction cache child token tab	quote" write parent function entry branch child fix path cache root 日本語 日本語 unicode cache entry root read value path 日本語 bash numbe
        → grep {"path":"/tmp/src/file.ts","command":"assistant leaf thinking result pa…
        ← grep: root bash test backslash\ read summary backslash\ function user context …
        ── user ──
        summary newline cache assistant error session tool thinking error user root child value compaction refactor module module
        ── assistant ──
        tool tab	quote" grep model summary model naïve string entry module edit token naïve session tool user session module the café label path leaf read parent error tab	quote" read
         bash branch write fork
         🚀 error thinking café label session tab	quote" 🚀
        emoji append context tool model fix append ar
        → grep {"path":"/tmp/src/file.ts","command":"read cache branch newline"}
        ← grep: prompt fix tab quote" build grep append newline fix compaction file new…
        ── assistant ──
        café compaction branch parent cache string edit grep backslash\ cache grep emoji compaction model file unicode grep naïve naïve tree user object
         backslash\ child newline result summary bash string naïve error token build refactor newlin
        ── user ──
        number refactor child prompt error number tab	quote" newline thinking assistant session read object naïve roo
        ── assistant ──
        module café thinking tool the array unicode number find entry
         find result edit tab	quote" prompt session result model tab	quote" newline café test the write summary value label build naïve user 🚀 read path user user path entry path function grep entry root
        edit café
         leaf model summary root write value user write append string refactor cac
        ── user ──
        unicode file number summary refactor error thinking thinking path string the function grep error refactor find emoji session result tool value error read object path edit root thinking grep cache thinking summa
        ── user ──
        café compaction module thinking thinking cache module naïve cache café emoji path the path write array array backslash\ session user object leaf thinking write read fix result parent function prompt emoji user summary un
        ── user ──
        compaction root build cache compaction token model root 🚀 read result compaction naïve root value branch the
        20 message(s)
    "#]]
    .assert_eq(&text(tmp.path(), &["--dialect", "omp", "context", &omp.to_string_lossy()])?);
    expect![[r#"
        0f5597c4   user: value tab quote" bash root root array the entry assistant entr…
        aa26d799   user: label naïve session find append module cache number user entry…
        4b07a5d9   user: write function café path number the fork result cache number t…
        70fb223f   assistant: context thinking child summary number assistant value 日…
        23594136   user: append 日本語 root refactor find test entry label session root…
        fc6b0af6   assistant: leaf build naïve error find append child prompt edit refa…
        21d30e34   toolResult: function read cache tree refactor leaf string 日本語 rea…
        a8e58498   assistant: 日本語 unicode cache test model summary tab quote" read a…
        0563fb0b   toolResult: label root context model parent label path find token pa…
        ac81ef66   assistant: array newline backslash\ user path number parent summary …
        2c7f5160   assistant: unicode cache model tree entry value build model entry to…
        4eb967a9   toolResult: fix naïve compaction café module session café 🚀 user re…
        955abfd4   assistant: parent fix path write refactor 🚀 read emoji object root …
        9a1813b2   assistant: grep fix string summary emoji test tab quote" the unicode…
        033f88f5   user: context parent leaf tree tool file label tool result naïve thi…
        7e9d34fd   assistant: assistant bash newline tab quote" compaction the fork 日…
        16 entries
    "#]]
    .assert_eq(&text(tmp.path(), &["branch", &pi.to_string_lossy()])?);
    Ok(())
}

#[test]
fn check_names_what_the_loader_repaired() -> Result<()> {
    let tmp = TempDir::try_new("human-check")?;
    let pi = sample(tmp.path(), "pi")?;
    expect![[r#"
        <tmp>/sessions/--home-user-project--/2026-01-01T00-00-00-000Z_pi.jsonl: no damage found
    "#]]
    .assert_eq(&text(tmp.path(), &["check", &pi.to_string_lossy()])?);
    let mut damaged = fs_err::read_to_string(&pi)?;
    damaged.push_str("not json\n{\"type\":\"message\",\"id\":\"torn");
    let torn = tmp.path().join("torn.jsonl");
    fs_err::write(&torn, damaged)?;
    expect![[r#"
        <tmp>/torn.jsonl: line 42 (byte 25609): not JSON, skipped: invalid JSON: unexpected text
        <tmp>/torn.jsonl: line 43 (byte 25618): torn last line skipped (an interrupted write)
        2 finding(s)
        [exit 1] "#]]
    .assert_eq(&text(tmp.path(), &["check", &torn.to_string_lossy()])?);
    Ok(())
}

#[test]
fn ls_prints_a_table_that_fits_the_width() -> Result<()> {
    let tmp = TempDir::try_new("human-ls")?;
    sample(tmp.path(), "pi")?;
    let dir = tmp.path().join("sessions").join("--home-user-project--");
    expect![[r#"
            PIN  MODIFIED    AGENT  MSGS  ID        NAME / FIRST MESSAGE     CWD
                 2026-01-01  pi       32  019b76da  value write append fil…  /home/user/pro…
            1 session(s)
        "#]]
    .assert_eq(&text(tmp.path(), &["--dialect", "pi", "ls", &dir.to_string_lossy(), "--cwd", "/home/user/project"])?);
    // A `COLUMNS` wider than any terminal lays the table out at its natural width: no
    // overflow, and no memory reserved for the width asked.
    for columns in ["99999999999", "18446744073709551615"] {
        let out = bin(tmp.path())
            .args(["--text", "--dialect", "pi", "ls", &dir.to_string_lossy(), "--cwd", "/home/user/project"])
            .env("COLUMNS", columns)
            .env("NO_COLOR", "1")
            .env("HOME", tmp.path().join("home"))
            .output()?;
        assert!(out.status.success(), "COLUMNS={columns}: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout)?;
        assert!(stdout.contains("/home/user/project") && !stdout.contains('…'), "COLUMNS={columns}: {stdout}");
    }
    Ok(())
}

/// `pin` marks a session `*` and lists it first; `archive` takes it out of `ls` until
/// `ls --archived`; the marks live in the state folder of `$HOME`, never in the session.
#[test]
fn pins_and_the_archive_show_in_ls() -> Result<()> {
    let tmp = TempDir::try_new("human-pins")?;
    let sampled = sample(tmp.path(), "pi")?;
    // In pi's home, where an id prefix finds it.
    let dir = tmp.path().join("home/.pi/agent/sessions/--home-user-project--");
    fs_err::create_dir_all(&dir)?;
    let pi = dir.join("s.jsonl");
    fs_err::rename(&sampled, &pi)?;
    let before = fs_err::read(&pi)?;
    let ls = |extra: &[&str]| -> Result<String> {
        let d = dir.to_string_lossy();
        let mut args = vec!["--dialect", "pi", "ls", &*d, "--cwd", "/home/user/project"];
        args.extend_from_slice(extra);
        text(tmp.path(), &args)
    };
    expect![[r#"
            pinned: pi session 019b76da-a800-7dc3-a765-d6cba1d4622c (<tmp>/home/.pi/agent/sessions/--home-user-project--/s.jsonl)
        "#]]
    .assert_eq(&text(tmp.path(), &["pin", &pi.to_string_lossy()])?);
    expect![[r#"
            already pinned: pi session 019b76da-a800-7dc3-a765-d6cba1d4622c (<tmp>/home/.pi/agent/sessions/--home-user-project--/s.jsonl)
        "#]]
    .assert_eq(&text(tmp.path(), &["pin", "019b76da"])?);
    expect![[r#"
        PIN  MODIFIED    AGENT  MSGS  ID        NAME / FIRST MESSAGE     CWD
        *    2026-01-01  pi       32  019b76da  value write append fil…  /home/user/pro…
        1 session(s)
    "#]]
    .assert_eq(&ls(&[])?);
    expect![[r#"
            archived: pi session 019b76da-a800-7dc3-a765-d6cba1d4622c (<tmp>/home/.pi/agent/sessions/--home-user-project--/s.jsonl)
        "#]]
    .assert_eq(&text(tmp.path(), &["archive", &pi.to_string_lossy()])?);
    expect![[r#"
        no sessions
    "#]]
    .assert_eq(&ls(&[])?);
    expect![[r#"
        PIN  MODIFIED    AGENT  MSGS  ID        NAME / FIRST MESSAGE     CWD
        *    2026-01-01  pi       32  019b76da  value write append fil…  /home/user/pro…
        1 archived session(s)
    "#]]
    .assert_eq(&ls(&["--archived"])?);
    expect![[r#"
            taken out of the archive: pi session 019b76da-a800-7dc3-a765-d6cba1d4622c (<tmp>/home/.pi/agent/sessions/--home-user-project--/s.jsonl)
        "#]]
    .assert_eq(&text(tmp.path(), &["unarchive", "019b76da"])?);
    expect![[r#"
            unpinned: pi session 019b76da-a800-7dc3-a765-d6cba1d4622c (<tmp>/home/.pi/agent/sessions/--home-user-project--/s.jsonl)
        "#]]
    .assert_eq(&text(tmp.path(), &["unpin", "019b76da"])?);
    expect![[r#"
        PIN  MODIFIED    AGENT  MSGS  ID        NAME / FIRST MESSAGE     CWD
             2026-01-01  pi       32  019b76da  value write append fil…  /home/user/pro…
        1 session(s)
    "#]]
    .assert_eq(&ls(&[])?);
    assert_eq!(fs_err::read(&pi)?, before, "the session file is never written");
    let marks = fs_err::read_to_string(tmp.path().join("home/.local/state/session-store/marks.json"))?;
    expect![[r#"
        {
        	"version": 1,
        	"pinned": [],
        	"archived": [],
        	"ompArchived": []
        }
    "#]]
    .assert_eq(&marks);
    Ok(())
}

#[test]
fn export_writes_markdown() -> Result<()> {
    let tmp = TempDir::try_new("human-export")?;
    let pi = sample(tmp.path(), "pi")?;
    let out = text(tmp.path(), &["export", &pi.to_string_lossy(), "--format", "md"])?;
    let head: String = out.lines().take(24).map(|l| format!("{l}\n")).collect();
    expect![[r##"
        # value write append file grep

        `019b76da-a800-7dc3-a765-d6cba1d4622c` · /home/user/project · 2026-01-01T00:00:00.000Z

        ## User

        value tab	quote" bash root root array the entry assistant entry unicode read array cache number prompt tree cache naïve grep emoji function summary branch read branch 🚀
         number function parent root tes

        ## User

        label naïve session find append module cache number user entry tree tab	quote

        ## User

        write function café path number the fork result cache number thinking token emoji edit file fix 🚀 read result append refactor leaf leaf build fork context child café sessio

        ## Assistant

        > *thinking*
        > context test tool array tree context summary bash unicode tool newline number tree read user 日本語 write child child conte

        context thinking
         child summary number assistant value 日本語 grep label root label refactor newline object test cache value token thinking object array
    "##]].assert_eq(&head);
    Ok(())
}
