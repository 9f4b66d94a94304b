package githubfake

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Full objects as GitHub's OpenAPI description requires them (the
// repository, an account named only by its login), so that every answer
// of the fake validates against the response schemas
// (pkg/github's TestGitHubContract checks it).

// stableID is a positive id derived from a name, the same every run.
func stableID(kind, name string) int64 {
	h := fnv.New32a()
	h.Write([]byte(kind + "\x00" + name))
	return int64(h.Sum32()%1_000_000_000) + 1
}

// ownerJSON is the account login as a repository's owner names it.
func ownerJSON(login string) map[string]any {
	return userJSON(&account{Login: login, ID: stableID("user", login)})
}

// fakeEpoch is when every repository of the fake was created.
var fakeEpoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// repoJSON is GitHub's full repository object for owner/repo.
func (a *API) repoJSON(owner, repo string) map[string]any {
	full := owner + "/" + repo
	api := repoAPI(owner, repo)
	html := "https://github.com/" + full
	branch := a.defaultBranch(owner, repo)
	if branch == "" {
		branch = "main"
	}
	return map[string]any{
		"id": stableID("repo", full), "node_id": nodeID("R", stableID("repo", full)), "name": repo, "full_name": full,
		"owner": ownerJSON(owner), "private": !a.public(owner, repo), "html_url": html, "description": nil, "fork": false,
		"url": api, "archive_url": api + "/{archive_format}{/ref}", "assignees_url": api + "/assignees{/user}",
		"blobs_url": api + "/git/blobs{/sha}", "branches_url": api + "/branches{/branch}",
		"collaborators_url": api + "/collaborators{/collaborator}", "comments_url": api + "/comments{/number}",
		"commits_url": api + "/commits{/sha}", "compare_url": api + "/compare/{base}...{head}",
		"contents_url": api + "/contents/{+path}", "contributors_url": api + "/contributors",
		"deployments_url": api + "/deployments", "downloads_url": api + "/downloads", "events_url": api + "/events",
		"forks_url": api + "/forks", "git_commits_url": api + "/git/commits{/sha}", "git_refs_url": api + "/git/refs{/sha}",
		"git_tags_url": api + "/git/tags{/sha}", "hooks_url": api + "/hooks",
		"issue_comment_url": api + "/issues/comments{/number}", "issue_events_url": api + "/issues/events{/number}",
		"issues_url": api + "/issues{/number}", "keys_url": api + "/keys{/key_id}", "labels_url": api + "/labels{/name}",
		"languages_url": api + "/languages", "merges_url": api + "/merges", "milestones_url": api + "/milestones{/number}",
		"notifications_url": api + "/notifications{?since,all,participating}", "pulls_url": api + "/pulls{/number}",
		"releases_url": api + "/releases{/id}", "stargazers_url": api + "/stargazers", "statuses_url": api + "/statuses/{sha}",
		"subscribers_url": api + "/subscribers", "subscription_url": api + "/subscription", "tags_url": api + "/tags",
		"teams_url": api + "/teams", "trees_url": api + "/git/trees{/sha}",
		"clone_url": html + ".git", "git_url": "git://github.com/" + full + ".git", "ssh_url": "git@github.com:" + full + ".git",
		"svn_url": html, "mirror_url": nil, "homepage": nil, "language": nil, "default_branch": branch,
		"forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0, "watchers_count": 0, "size": 0,
		"open_issues": 0, "open_issues_count": 0, "has_downloads": true, "has_issues": true, "has_projects": false,
		"has_wiki": false, "has_pages": false, "archived": false, "disabled": false, "license": nil,
		"visibility": map[bool]string{true: "public", false: "private"}[a.public(owner, repo)],
		"pushed_at":  stamp(fakeEpoch), "created_at": stamp(fakeEpoch), "updated_at": stamp(fakeEpoch),
	}
}

// pullLinks is a pull request's _links.
func pullLinks(owner, repo string, n int, headSHA string) map[string]any {
	api := repoAPI(owner, repo)
	num := strconv.Itoa(n)
	href := func(u string) map[string]any { return map[string]any{"href": u} }
	return map[string]any{"self": href(api + "/pulls/" + num), "html": href("https://github.com/" + owner + "/" + repo + "/pull/" + num),
		"issue": href(api + "/issues/" + num), "comments": href(api + "/issues/" + num + "/comments"),
		"review_comments": href(api + "/pulls/" + num + "/comments"), "review_comment": href(api + "/pulls/comments{/number}"),
		"commits": href(api + "/pulls/" + num + "/commits"), "statuses": href(api + "/statuses/" + headSHA)}
}

// runJSON completes a workflow run's fields (id, name, head_sha, status,
// conclusion, event and run_attempt set) to GitHub's full object; the
// fields it has stay.
func (a *API) runJSON(owner, repo string, run map[string]any) map[string]any {
	id := fmtInt(run["id"])
	api := repoAPI(owner, repo) + "/actions/runs/" + id
	repoObj := a.repoJSON(owner, repo)
	name, _ := run["name"].(string)
	out := map[string]any{"node_id": "WFR_kwfake" + id, "head_branch": nil, "run_number": run["id"], "display_title": name,
		"path": ".github/workflows/ci.yml", "workflow_id": stableID("workflow", owner+"/"+repo+"/"+name),
		"url": api, "html_url": "https://github.com/" + owner + "/" + repo + "/actions/runs/" + id,
		"created_at": stamp(fakeEpoch), "updated_at": stamp(fakeEpoch), "head_commit": nil,
		"head_repository": repoObj, "repository": repoObj, "jobs_url": api + "/jobs", "logs_url": api + "/logs",
		"check_suite_url": repoAPI(owner, repo) + "/check-suites/" + id, "cancel_url": api + "/cancel", "rerun_url": api + "/rerun",
		"artifacts_url": api + "/artifacts", "workflow_url": repoAPI(owner, repo) + "/actions/workflows/ci.yml",
		"pull_requests": []any{}}
	for k, v := range run {
		out[k] = v
	}
	return out
}

func fmtInt(v any) string {
	switch n := v.(type) {
	case int:
		return strconv.Itoa(n)
	case int64:
		return strconv.FormatInt(n, 10)
	}
	return "0"
}

// installationJSON is GitHub's installation object for in.
func (a *API) installationJSON(in *InstallationConfig) map[string]any {
	id := strconv.FormatInt(in.ID, 10)
	acct := ownerJSON(in.Owner)
	acct["type"] = "Organization"
	return map[string]any{"id": in.ID, "app_id": a.cfg.AppID, "app_slug": a.slug(), "target_id": acct["id"],
		"target_type": "Organization", "account": acct, "repository_selection": "selected", "single_file_name": nil,
		"access_tokens_url": apiRoot + "/app/installations/" + id + "/access_tokens",
		"repositories_url":  apiRoot + "/installation/repositories",
		"html_url":          "https://github.com/organizations/" + in.Owner + "/settings/installations/" + id,
		"permissions":       copyPerms(in.Permissions), "events": []string{}, "created_at": stamp(fakeEpoch),
		"updated_at": stamp(fakeEpoch), "suspended_by": nil, "suspended_at": nil}
}
