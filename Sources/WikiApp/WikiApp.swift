// WikiApp: the wiki in a browser.
