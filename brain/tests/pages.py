"""Browser helpers shared by the page tests of every app."""


def sign_in(page, username: str, password: str, *, expect_success: bool = True) -> None:
    if "/login/" not in page.url:
        page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    if expect_success:
        page.wait_for_url(lambda url: "/login/" not in url)
    else:
        page.wait_for_load_state()
